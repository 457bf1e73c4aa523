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

    func scrape(_ metrics: HostMetrics, _ plugins: [PluginStatus], dir: URL, other: [PluginStatus] = [], outbox: Int? = 0) -> [String: Double] {
        let bots = [HostMetrics.BotFigures(engine: metrics.engine(bot: "bot"), plugins: plugins, engineRunning: true, outboxPending: outbox),
                    HostMetrics.BotFigures(engine: metrics.engine(bot: "other"), plugins: other, engineRunning: false, outboxPending: nil)]
        return AdminAPITests.prometheus(String(decoding: metrics.render(bots: bots, uptime: 1), as: UTF8.self))
    }

    @Test func pluginCountersFollowTheRunnerAndResetWhenItIsReplaced() {
        let metrics = HostMetrics()
        let dir = URL(fileURLWithPath: NSTemporaryDirectory())
        var m = scrape(metrics, [status("a", handled: 5, restarts: 1, queue: 3), status("b", handled: 1)], dir: dir, other: [status("a", handled: 7)])
        #expect(m[#"swiftplex_plugin_events_handled_total{bot="bot",instance="a"}"#] == 5)
        #expect(m[#"swiftplex_plugin_restarts_total{bot="bot",instance="a"}"#] == 1)
        #expect(m[#"swiftplex_plugin_queue_depth{bot="bot",instance="a"}"#] == 3)
        #expect(m[#"swiftplex_engine_outbox_pending{bot="bot"}"#] == 0)
        // Another bot's instance of the same name is its own series.
        #expect(m[#"swiftplex_plugin_events_handled_total{bot="other",instance="a"}"#] == 7)
        #expect(m[#"swiftplex_engine_running{bot="bot"}"#] == 1 && m[#"swiftplex_engine_running{bot="other"}"#] == 0)
        m = scrape(metrics, [status("a", handled: 9, condition: .restarting), status("b", handled: 1)], dir: dir, outbox: 4)
        #expect(m[#"swiftplex_engine_outbox_pending{bot="bot"}"#] == 4)
        #expect(m[#"swiftplex_plugin_events_handled_total{bot="bot",instance="a"}"#] == 9)
        #expect(m[#"swiftplex_plugin_condition{bot="bot",instance="a",condition="restarting"}"#] == 1)
        #expect(m[#"swiftplex_plugin_condition{bot="bot",instance="a",condition="running"}"#] == 0)
        // A reload replaced "a" (its runner counts from 0 again) and removed "b".
        m = scrape(metrics, [status("a", handled: 2)], dir: dir, outbox: nil)
        #expect(m[#"swiftplex_engine_outbox_pending{bot="bot"}"#] == 4)  // not read this time: the last value stays
        #expect(m[#"swiftplex_plugin_events_handled_total{bot="bot",instance="a"}"#] == 2)
        #expect(m[#"swiftplex_plugin_events_handled_total{bot="bot",instance="b"}"#] == nil)
        #expect(m[#"swiftplex_plugin_queue_depth{bot="bot",instance="b"}"#] == nil)
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
        let host = HostMetrics()
        let metrics = host.engine(bot: "bot"), other = host.engine(bot: "other")
        let made = Self.made, user = Self.user
        func item(_ dir: CIDirection, status: CIStatus) -> AChatItem { Self.item(dir, status: status) }
        metrics.observe(.newChatItems(user: user, chatItems: [item(.directRcv, status: .rcvNew), item(.directSnd, status: .sndNew)]))
        metrics.observe(.chatItemsStatusesUpdated(user: user, chatItems: [item(.directSnd, status: .sndSent(sndProgress: .complete))]),
                        now: made.addingTimeInterval(0.3))
        metrics.observe(.chatItemsStatusesUpdated(user: user, chatItems: [item(.directSnd, status: .sndRcvd(msgRcptStatus: .ok, sndProgress: .complete))]),
                        now: made.addingTimeInterval(2))
        other.observe(.newChatItems(user: user, chatItems: [item(.directRcv, status: .rcvNew), item(.directRcv, status: .rcvNew)]))
        let m = AdminAPITests.prometheus(String(decoding: host.registry.emitToBuffer(), as: UTF8.self))
        #expect(m[#"swiftplex_engine_messages_received_total{bot="bot"}"#] == 1)
        #expect(m[#"swiftplex_engine_messages_received_total{bot="other"}"#] == 2)
        #expect(m[#"swiftplex_engine_messages_sent_total{bot="bot"}"#] == 1 && m[#"swiftplex_engine_messages_delivered_total{bot="bot"}"#] == 1)
        #expect(m[#"swiftplex_engine_messages_sent_total{bot="other"}"#] == 0)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{bot="bot",stage="relay",le="0.25"}"#] == 0)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{bot="bot",stage="relay",le="0.5"}"#] == 1)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{bot="bot",stage="peer",le="1.0"}"#] == 0)
        #expect(m[#"swiftplex_engine_delivery_seconds_bucket{bot="bot",stage="peer",le="2.5"}"#] == 1)
    }
}
