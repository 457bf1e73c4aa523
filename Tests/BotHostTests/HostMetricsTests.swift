@testable import BotHost
import ChatModel
import Foundation
@testable import PluginHost
import SwiftplexBase
import Testing

/// `HostMetrics`' own bookkeeping, on values a test controls (the live figures are checked on a
/// real host in `AdminAPITests`).
@Suite struct HostMetricsTests {
    func status(_ name: String, handled: Int, restarts: Int = 0, condition: PluginCondition = .running, queue: Int = 0) -> PluginStatus {
        var stats = PluginStats()
        stats.delivered = handled
        stats.restarts = restarts
        return PluginStatus(name: name, info: PluginInfo(name: "p", version: "1", description: "", events: ["*"], configSchema: nil),
                            isolation: .inProcess, stats: stats, condition: condition, queueDepth: queue)
    }

    func scrape(_ metrics: HostMetrics, _ plugins: [PluginStatus], dir: URL) -> [String: Double] {
        AdminAPITests.prometheus(String(decoding: metrics.render(plugins: plugins, engineRunning: true, uptime: 1, agentDatabase: dir.appendingPathComponent("none.db")),
                                        as: UTF8.self))
    }

    @Test func pluginCountersFollowTheRunnerAndResetWhenItIsReplaced() {
        let metrics = HostMetrics()
        let dir = URL(fileURLWithPath: NSTemporaryDirectory())
        var m = scrape(metrics, [status("a", handled: 5, restarts: 1, queue: 3), status("b", handled: 1)], dir: dir)
        #expect(m[#"swiftplex_plugin_events_handled_total{instance="a"}"#] == 5)
        #expect(m[#"swiftplex_plugin_restarts_total{instance="a"}"#] == 1)
        #expect(m[#"swiftplex_plugin_queue_depth{instance="a"}"#] == 3)
        #expect(m["swiftplex_engine_outbox_pending"] == 0)  // no agent database: nothing waits
        m = scrape(metrics, [status("a", handled: 9, condition: .restarting), status("b", handled: 1)], dir: dir)
        #expect(m[#"swiftplex_plugin_events_handled_total{instance="a"}"#] == 9)
        #expect(m[#"swiftplex_plugin_condition{instance="a",condition="restarting"}"#] == 1)
        #expect(m[#"swiftplex_plugin_condition{instance="a",condition="running"}"#] == 0)
        // A reload replaced "a" (its runner counts from 0 again) and removed "b".
        m = scrape(metrics, [status("a", handled: 2)], dir: dir)
        #expect(m[#"swiftplex_plugin_events_handled_total{instance="a"}"#] == 2)
        #expect(m[#"swiftplex_plugin_events_handled_total{instance="b"}"#] == nil)
        #expect(m[#"swiftplex_plugin_queue_depth{instance="b"}"#] == nil)
    }

    static let made = Date(timeIntervalSince1970: 1_000_000)
    static let user: User = {
        let yes = SimplePreference(allow: .yes)
        return User(userId: 1, agentUserId: 1, userContactId: 1, localDisplayName: "bot", profile: LocalProfile(profileId: 1, profile: Profile(displayName: "bot")),
                    fullPreferences: FullPreferences(timedMessages: TimedMessagesPreference(allow: .yes), fullDelete: yes, reactions: yes, voice: yes,
                                                     files: yes, calls: yes, sessions: yes, commands: []),
                    activeUser: true, activeOrder: 1)
    }()

    /// An item made at ``made``. The host reads the item alone; the chat it is in does not matter to it.
    static func item(_ dir: CIDirection, status: CIStatus, id: Int64 = 1) -> AChatItem {
        let stamp = ChatTimestamp(made)
        let chat = ChatInfo.contactRequest(contactRequest: UserContactRequest(contactRequestId: 1, agentInvitationId: "1", localDisplayName: "person", profileId: 2,
                                                                              profile: LocalProfile(profileId: 2, profile: Profile(displayName: "person")),
                                                                              createdAt: stamp, updatedAt: stamp))
        let content: CIContent = dir == .directRcv ? .rcvMsgContent(.text("hi")) : .sndMsgContent(.text("hi"))
        return AChatItem(chatInfo: chat, chatItem: ChatItem(chatDir: dir, meta: CIMeta(itemId: id, itemTs: stamp, itemText: "hi", itemStatus: status, deletable: true,
                                                                                       editable: dir == .directSnd, createdAt: stamp, updatedAt: stamp),
                                                            content: content))
    }

    @Test func theReplayMarkIsTheNewestReceivedItemOfANewChatItemsEvent() {
        let user = Self.user
        #expect(BotHost.receivedItemId(.newChatItems(user: user, chatItems: [Self.item(.directRcv, status: .rcvNew, id: 7), Self.item(.directRcv, status: .rcvNew, id: 3),
                                                                              Self.item(.directSnd, status: .sndNew, id: 9)])) == 7)
        #expect(BotHost.receivedItemId(.newChatItems(user: user, chatItems: [Self.item(.directSnd, status: .sndNew, id: 9)])) == nil)
        #expect(BotHost.receivedItemId(.chatItemsStatusesUpdated(user: user, chatItems: [Self.item(.directRcv, status: .rcvNew, id: 4)])) == nil)
        #expect(BotHost.receivedItemId(.hostConnected(protocol: "smp", transportHost: "relay")) == nil)
    }

    @Test func messagesAndDeliveryTimesAreCountedFromEvents() throws {
        let metrics = HostMetrics()
        let made = Self.made, user = Self.user
        func item(_ dir: CIDirection, status: CIStatus) -> AChatItem { Self.item(dir, status: status) }
        metrics.observe(.newChatItems(user: user, chatItems: [item(.directRcv, status: .rcvNew), item(.directSnd, status: .sndNew)]))
        metrics.observe(.chatItemsStatusesUpdated(user: user, chatItems: [item(.directSnd, status: .sndSent(sndProgress: .complete))]),
                        now: made.addingTimeInterval(0.3))
        metrics.observe(.chatItemsStatusesUpdated(user: user, chatItems: [item(.directSnd, status: .sndRcvd(msgRcptStatus: .ok, sndProgress: .complete))]),
                        now: made.addingTimeInterval(2))
        let m = AdminAPITests.prometheus(String(decoding: metrics.registry.emitToBuffer(), as: UTF8.self))
        #expect(m["swiftplex_engine_messages_received_total"] == 1)
        #expect(m["swiftplex_engine_messages_sent_total"] == 1 && m["swiftplex_engine_messages_delivered_total"] == 1)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{stage="relay",le="0.25"}"#] == 0)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{stage="relay",le="0.5"}"#] == 1)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{stage="peer",le="1.0"}"#] == 0)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{stage="peer",le="2.5"}"#] == 1)
    }
}
