import ChatAPI
import Foundation
import RelayProtocol
import SwiftplexBase
import TestSupport

/// Channel scenes shared by the suites that need a channel with active chat relays
/// (ChatAPITests' channel suites, the host's admin API and dashboard tests).

/// `/_create user` of a chat relay user named `name`.
public func relayUserCommand(_ name: String) -> String {
    #"/_create user {"profile": {"displayName": "\#(name)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": true, "clientService": false}"#
}

/// Two relay users (`relay1`, `relay2`) on one engine, started, each with its relay address (`/r`).
public func makeRelayUsers(_ r: ChatAPI) async throws -> [String] {
    var addresses: [String] = []
    for (i, name) in ["relay1", "relay2"].enumerated() {
        _ = await r.execute(relayUserCommand(name))
        if i == 0 { _ = await r.execute("/_start") }
        let answer = await r.execute("/_address \(i + 1)")
        guard let link = answer["connLinkContact"]?["connShortLink"]?.stringValue else { throw TestFailure("no relay address: \(answer)") }
        addresses.append(link)
    }
    return addresses
}

/// Makes the user `owner` on `o`, registers both relay addresses (`one`, `two`), creates the
/// channel `news` with both and waits until both relays are `active`; returns its id and link.
public func makeActiveChannel(_ o: ChatAPI, _ oIn: ChatInbox, _ addresses: [String]) async throws -> (groupId: Int, link: String) {
    await startUser(o, "owner")
    let set = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
    guard case let .array(relays)? = set["chatRelays"], relays.count == 2 else { throw TestFailure("\(set)") }
    let ids = relays.compactMap { $0["chatRelayId"]?.intValue }.map(String.init).joined(separator: ",")
    let created = await o.execute(#"/_public group 1 \#(ids) {"displayName": "news", "fullName": ""}"#)
    guard let groupId = created["groupInfo"]?["groupId"]?.intValue,
          let link = created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue else { throw TestFailure("\(created)") }
    // (30 s: under a full parallel test run the relays' steps take longer.)
    for _ in 0..<2 { _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30)) }
    return (groupId, link)
}

/// The owner's post of `text` to channel `groupId`.
public func postToChannel(_ o: ChatAPI, _ groupId: Int, _ text: String) async -> JSONValue {
    await o.execute(#"/_send #\#(groupId) json [{"msgContent": {"type": "text", "text": "\#(text)"}}]"#)
}

/// The scene most channel tests start from, on the relay server at `relay`: the engine `relays`
/// (`r`, with two relay users, `makeRelayUsers`) and the engine `owner` (`o`, with the channel
/// `news` on both relays, both `active`, `makeActiveChannel`); `body` gets both engines, their
/// inboxes, and the channel's group id and link.
public func withActiveChannel<T: Sendable>(_ dir: URL, relay: RelayAddress,
                                           _ body: (ChatAPI, ChatInbox, ChatAPI, ChatInbox, Int, String) async throws -> T) async throws -> T {
    try await withEngine(dir, "relays", relays: [relay]) { r, rIn in
        let addresses = try await makeRelayUsers(r)
        return try await withEngine(dir, "owner", relays: [relay]) { o, oIn in
            let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
            return try await body(r, rIn, o, oIn, groupId, link)
        }
    }
}
