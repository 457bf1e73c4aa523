import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// `/relay test <address>` (`x.grp.relay.test`, docs/channels.md §9 "Testing a chat relay"): an
/// owner checks a chat relay's address before using it. Engines on a live relay server (TLS on
/// loopback, SQLite files).
@Suite(.timeLimit(.minutes(3))) struct ChatRelayTestTests: LiveRelaySuite {
    func chatError(_ r: JSONValue) -> JSONValue? { r["type"]?.stringValue == "chatCmdError" ? r["chatError"]?["errorType"] : nil }

    @Test func anOwnerTestsARelayAddress() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                    await startUser(o, "owner")
                    _ = await o.execute("/relays name=one \(addresses[0])")
                    // The relay proves it holds its address: its profile, no failure.
                    let passed = await o.execute("/relay test \(addresses[0])")
                    #expect(passed["type"]?.stringValue == "chatRelayTestResult", "\(passed)")
                    #expect(passed["relayProfile"]?["displayName"]?.stringValue == "relay1", "\(passed)")
                    #expect(passed["relayAddress"]?.stringValue == addresses[0])
                    #expect(passed["testFailure"] == nil, "\(passed)")
                    // The registered relay is marked tested.
                    let listed = await o.execute("/relays")
                    #expect(listed["chatRelays"]?.arrayFirst?["tested"]?.boolValue == true, "\(listed)")
                    // The API form, for a relay not registered.
                    let second = await o.execute("/_relay test 1 \(addresses[1])")
                    #expect(second["relayProfile"]?["displayName"]?.stringValue == "relay2", "\(second)")
                    #expect(second["testFailure"] == nil, "\(second)")

                    // What is no relay address is refused before anything is tried.
                    let own = await o.execute("/_address 1 short=on")
                    let contact = try #require(own["connLinkContact"]?["connShortLink"]?.stringValue, "\(own)")
                    let notRelay = await o.execute("/relay test \(contact)")
                    #expect(chatError(notRelay)?["code"]?.stringValue == "notRelayAddress", "\(notRelay)")
                    let garbage = await o.execute("/relay test hello")
                    #expect(chatError(garbage)?["code"]?.stringValue == "invalidLink", "\(garbage)")

                    // A relay that cannot prove the address (its key is gone): fails at `verify`.
                    // (Through the engine's own store: SQLite or PostgreSQL alike.)
                    _ = try await r.controller.dbWrite { db in try db.execute(sql: "DELETE FROM relay_address_key WHERE user_id = 1") }
                    let unsigned = await o.execute("/relay test \(addresses[0])")
                    #expect(unsigned["testFailure"]?["testStep"]?.stringValue == "verify", "\(unsigned)")
                    #expect(await o.execute("/relays")["chatRelays"]?.arrayFirst?["tested"]?.boolValue == false)

                    // An address its relay deleted: fails at `resolve`.
                    let deleted = await r.execute("/_delete_address 2")
                    #expect(deleted["type"]?.stringValue == "userContactLinkDeleted", "\(deleted)")
                    let gone = await o.execute("/relay test \(addresses[1])")
                    #expect(gone["testFailure"]?["testStep"]?.stringValue == "resolve", "\(gone)")
                }
            }
        }
    }
}
