import SwiftplexBase
import Testing
@testable import GroupProtocol

/// A deterministic network of group machines, one per participant, standing in for the agent and
/// the engine: it performs each machine's effects (connections made and joined, messages sent over
/// up connections or queued until they are up, connections deleted) by feeding the other machines'
/// inputs, one at a time in FIFO order. Tests can hold messages or joins and release them later to
/// interleave events.
struct GroupNet {
    struct Held {
        var to: String
        var input: GroupInput
    }

    static let brokerTs = "2026-11-23T18:00:00Z"

    /// Participant name → its machine (once it is in the group).
    var states: [String: GroupState] = [:]
    var profiles: [String: MemberProfile] = [:]
    /// Name ↔ member id.
    var ids: [String: MemberId] = [:]
    var names: [MemberId: String] = [:]
    /// Contact refs: (owner, ref) → the other participant.
    var contacts: [String: [ContactRef: String]] = [:]
    private var nextContact: ContactRef = 1

    /// Pending inputs.
    var queue: [(to: String, input: GroupInput)] = []
    /// Inputs held by `hold` predicates, released with `release`.
    var held: [Held] = []
    var holds: [(String, GroupInput) -> Bool] = []

    /// Invitation connections: connRequest → (creator, the member it is for).
    var invitations: [String: (creator: String, forMember: MemberId)] = [:]
    /// Connections by unordered pair of names: up, or pending with messages queued for when up.
    var up: Set<[String]> = []
    var deleted: Set<[String]> = []
    var pendingSends: [[String]: [(to: String, input: GroupInput)]] = [:]

    // What happened.
    var events: [String: [GroupEvent]] = [:]
    var applied: [String: [(envelope: GroupEnvelope, author: MemberId, forwardedBy: MemberId?, blocked: Bool, msgTs: String?)]] = [:]
    var errors: [String: [(input: GroupInput, error: GroupError)]] = [:]
    var sent: [(from: String, to: String, event: String)] = []
    var history: [String: [MemberId]] = [:]
    var effects: [String: [GroupEffect]] = [:]
    /// Effects aimed at members or connections outside the network.
    var outside: [(String, GroupEffect)] = []
    private var counter = 0

    init() {}

    static func memberId(_ name: String) -> MemberId {
        // Names are letters: valid base64url once the length is not 4n+1.
        var s = name
        if s.count % 4 == 1 { s += "A" }
        return MemberId(s)!
    }

    mutating func newId() -> String {
        counter += 1
        return "msg\(counter)"
    }

    mutating func person(_ name: String) {
        profiles[name] = MemberProfile(displayName: name)
        ids[name] = Self.memberId(name)
        names[Self.memberId(name)] = name
    }

    mutating func createGroup(by name: String, _ groupName: String = "team") {
        person(name)
        states[name] = GroupState(creator: ids[name]!, profile: profiles[name]!, groupProfile: GroupProfile(displayName: groupName))
    }

    /// A direct contact between two people, as each sees it.
    mutating func contact(_ a: String, _ b: String) -> ContactRef {
        if ids[b] == nil { person(b) }
        let ref = nextContact
        nextContact += 1
        contacts[a, default: [:]][ref] = b
        contacts[b, default: [:]][ref] = a
        return ref
    }

    func state(_ name: String) -> GroupState { states[name]! }
    func member(_ name: String, sees other: String) -> GroupMemberState? { states[name]?.member(ids[other] ?? Self.memberId(other)) }

    static func pair(_ a: String, _ b: String) -> [String] { [a, b].sorted() }

    /// Gives `name` one input now and performs its effects (queueing the consequences).
    @discardableResult
    mutating func input(_ name: String, _ input: GroupInput) -> GroupError? {
        guard var s = states[name] else {
            Issue.record("\(name) is not in the group")
            return nil
        }
        var idSource = IdCounter(prefix: "\(name)-\(counter)")
        counter += 1
        do {
            let out = try s.handle(input) { idSource.next() }
            states[name] = s
            effects[name, default: []].append(contentsOf: out)
            for e in out { perform(name, e) }
            return nil
        } catch {
            errors[name, default: []].append((input, error))
            return error
        }
    }

    struct IdCounter {
        let prefix: String
        var n = 0
        mutating func next() -> String {
            n += 1
            return "\(prefix)-\(n)"
        }
    }

    private mutating func enqueue(_ to: String, _ input: GroupInput) {
        if holds.contains(where: { $0(to, input) }) {
            held.append(Held(to: to, input: input))
        } else {
            queue.append((to, input))
        }
    }

    /// Delivers queued inputs until none is left; returns the errors that happened meanwhile.
    mutating func run(limit: Int = 10_000) {
        var steps = 0
        while !queue.isEmpty {
            let (to, inp) = queue.removeFirst()
            input(to, inp)
            steps += 1
            if steps > limit {
                Issue.record("network did not settle")
                return
            }
        }
    }

    /// Releases held inputs matching `predicate` (all by default) and runs.
    mutating func release(_ predicate: (Held) -> Bool = { _ in true }) {
        let now = held.filter(predicate)
        held.removeAll(where: predicate)
        holds.removeAll()
        for h in now { queue.append((h.to, h.input)) }
        run()
    }

    private mutating func perform(_ name: String, _ effect: GroupEffect) {
        let me = ids[name]!
        switch effect {
        case let .send(env, to):
            guard let other = names[to] else {
                outside.append((name, effect))
                return
            }
            sent.append((name, other, env.event))
            let key = Self.pair(name, other)
            guard !deleted.contains(key) else { return }
            let inp = GroupInput.received(from: me, env, brokerTs: Self.brokerTs)
            if up.contains(key) { enqueue(other, inp) } else { pendingSends[key, default: []].append((other, inp)) }
        case let .sendToContact(env, contact):
            let other = contacts[name]![contact]!
            sent.append((name, other, env.event))
            guard case let .invitation(inv)? = try? env.groupMessage() else {
                Issue.record("only invitations go over contacts")
                return
            }
            let theirRef = contact
            do {
                let (s, out) = try GroupState.invited(by: theirRef, inv, ownProfile: profiles[other]!)
                states[other] = s
                effects[other, default: []].append(contentsOf: out)
                ids[other] = inv.invitedMember.memberId
                names[inv.invitedMember.memberId] = other
                for e in out { perform(other, e) }
            } catch {
                errors[other, default: []].append((.join, error))
            }
        case let .createInvitation(forMember):
            let connReq = "conn:\(name)->\(forMember.text)"
            invitations[connReq] = (name, forMember)
            enqueue(name, .invitationCreated(for: forMember, connRequest: connReq))
        case let .joinConnection(forMember, connRequest, info):
            guard let inv = invitations[connRequest] else {
                // A connection request from outside the network (a test's hand-made message).
                outside.append((name, effect))
                return
            }
            #expect(ids[inv.creator] == forMember, "\(name) joins \(inv.creator)'s invitation as \(forMember)")
            #expect(inv.forMember == me, "invitation was made for \(inv.forMember), joined by \(me)")
            let key = Self.pair(name, inv.creator)
            guard !deleted.contains(key) else { return }
            enqueue(inv.creator, .confirmation(from: me, info: info))
        case .acceptLinkRequest:
            outside.append((name, effect)) // group links are driven by the engine tests (GroupLinkTests)
        case let .allowConnection(forMember, _):
            guard let other = names[forMember] else {
                outside.append((name, effect))
                return
            }
            let key = Self.pair(name, other)
            guard !deleted.contains(key) else { return }
            up.insert(key)
            enqueue(name, .connected(forMember))
            enqueue(other, .connected(me))
            for p in pendingSends.removeValue(forKey: key) ?? [] { enqueue(p.to, p.input) }
        case let .deleteConnection(forMember):
            guard let other = names[forMember] else {
                outside.append((name, effect))
                return
            }
            let key = Self.pair(name, other)
            deleted.insert(key)
            up.remove(key)
            pendingSends[key] = nil
        case .deleteAllConnections:
            for other in names.values where other != name {
                let key = Self.pair(name, other)
                deleted.insert(key)
                up.remove(key)
                pendingSends[key] = nil
            }
        case let .applyContent(env, author, forwardedBy, blocked, msgTs):
            applied[name, default: []].append((env, author, forwardedBy, blocked, msgTs))
        case let .emit(event):
            events[name, default: []].append(event)
        case let .sendHistory(to):
            history[name, default: []].append(to)
        case .saveMember, .saveMembership, .saveProfile, .saveIntroduction:
            break
        }
    }

    /// `inviter` adds `invitee` (a new contact), the invitee joins, and everything settles.
    mutating func add(_ invitee: String, by inviter: String, role: GroupMemberRole = .member, join: Bool = true) {
        let ref = contact(inviter, invitee)
        input(inviter, .addMember(contact: ref, memberId: ids[invitee]!, role: role))
        run()
        if join {
            input(invitee, .join)
            run()
        }
    }

    /// Content from `name` (x.msg.new with a text).
    @discardableResult
    mutating func say(_ name: String, _ text: String) -> GroupError? {
        let e = input(name, .sendContent(event: "x.msg.new", params: ["content": ["type": "text", "text": .string(text)]]))
        run()
        return e
    }

    func texts(at name: String) -> [String] {
        (applied[name] ?? []).compactMap { $0.envelope.params["content"]?["text"]?.stringValue }
    }

    func allErrors() -> [(String, GroupError)] {
        errors.flatMap { name, list in list.map { (name, $0.error) } }
    }
}
