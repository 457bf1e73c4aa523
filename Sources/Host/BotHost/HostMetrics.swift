import Agent
import ChatModel
import Foundation
import NIOConcurrencyHelpers
import PluginHost
import Prometheus
import SwiftplexBase

/// The host's Prometheus metrics, served at the admin API's `/metrics`.
///
/// - Engine: counted from the typed chat events the host already reads (messages received, messages
///   that reached their relay and their peer, with the time each took since the item was made),
///   the relays connected (the agent's `hostConnected`/`hostDisconnected`), and the agent's
///   outbox, read from its database (SQLite file or PostgreSQL schema) when scraped.
/// - Plugins: each instance's counters, condition and queue depth, taken from ``PluginManager``
///   when scraped.
/// - Process: resident memory and open file descriptors, read from `/proc/self` when scraped.
///
/// Engine and plugin series carry a `bot` label (the bot's name from the operator's config; one
/// ``EngineMetrics`` per bot). Labels never carry contact names, message texts, keys or addresses
/// of peers: only bot and plugin instance names (from the operator's config).
final class HostMetrics: Sendable {
    let registry: PrometheusCollectorRegistry

    private let uptime: Gauge
    private let authFailures: Counter
    private let adminRequests: Counter
    private let residentMemory: Gauge
    private let openFDs: Gauge
    private let maxFDs: Gauge

    private let pluginSeries = NIOLockedValueBox<[PluginKey: PluginSeries]>([:])

    /// The relays an engine is connected to, by host (the agent reports host names only).
    struct RelayState: Sendable {
        var connected: Set<String> = []
        /// Relays that were connected and are down now.
        var lost: Set<String> = []
    }

    static let latencyBuckets: [Duration] = [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                                             .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
                                             .seconds(30), .seconds(60), .seconds(300)]

    init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        func d(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: unit, helpText: help)
        }
        uptime = registry.makeGauge(descriptor: d("swiftplex_host_uptime", "seconds", "Time since the host started"))
        authFailures = registry.makeCounter(descriptor: d("swiftplex_admin_auth_failures", "total", "Admin API requests refused for a wrong or missing token"))
        adminRequests = registry.makeCounter(descriptor: d("swiftplex_admin_requests", "total", "Admin API requests answered"))
        residentMemory = registry.makeGauge(descriptor: d("process_resident_memory", "bytes", "Resident memory size"))
        openFDs = registry.makeGauge(descriptor: d("process_open", "fds", "Open file descriptors"))
        maxFDs = registry.makeGauge(descriptor: d("process_max", "fds", "The limit on open file descriptors"))
    }

    /// The engine series of one bot, labelled `bot="<name>"`.
    func engine(bot: String) -> EngineMetrics { EngineMetrics(registry: registry, bot: bot, changes: changes) }

    /// Bumped whenever a relay of any bot connects or goes (and by the host when an engine starts or stops).
    let changes = StateChanges()

    func countAuthFailure() { authFailures.increment() }
    func countAdminRequest() { adminRequests.increment() }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, as the Chat API writes it (parsed without ICU, whose
    /// formatters are not safe to make on many threads at once).
    static func parseTimestamp(_ text: String) -> Date? { ChatTimestamp(parsing: text)?.date }

    // MARK: Scraping

    /// What a scrape reads of one bot.
    struct BotFigures {
        var engine: EngineMetrics
        var plugins: [PluginStatus]
        var engineRunning: Bool
        /// The envelopes in the agent's outbox, read from its database for this scrape
        /// (``BotHost/metricsText()``); nil when it could not be read (the gauge keeps its last
        /// value rather than report 0).
        var outboxPending: Int?
    }

    /// The metrics in Prometheus' text format, with the values read at scrape time updated first.
    func render(bots: [BotFigures], uptime seconds: Double) -> [UInt8] {
        uptime.set(seconds)
        for bot in bots { bot.engine.scraped(engineRunning: bot.engineRunning, outboxPending: bot.outboxPending) }
        updatePlugins(bots.flatMap { bot in bot.plugins.map { (bot.engine.bot, $0) } })
        let process = Self.processFigures()
        if let rss = process.residentBytes { residentMemory.set(Int64(rss)) }
        if let fds = process.openFDs { openFDs.set(Int64(fds)) }
        if let max = process.maxFDs { maxFDs.set(Int64(max)) }
        return registry.emitToBuffer()
    }

    // MARK: Plugins

    /// One instance's series. Counters follow the runner's own counts: a runner replaced by a
    /// reload starts from zero, which the counter shows as a reset (as Prometheus expects).
    private struct PluginSeries: Sendable {
        var counters: [String: (counter: Counter, last: Int)]
        var queueDepth: Gauge
        var conditions: [PluginCondition: Gauge]
    }

    static let pluginCounters: [(name: String, help: String, value: @Sendable (PluginStats) -> Int)] = [
        ("swiftplex_plugin_events_handled", "Events the instance finished handling", { $0.delivered }),
        ("swiftplex_plugin_errors", "Events whose handler reported an error", { $0.failed }),
        ("swiftplex_plugin_timeouts", "Handlers that ran past their timeout", { $0.timedOut }),
        ("swiftplex_plugin_dropped", "Events dropped because the instance's queue was full", { $0.dropped }),
        ("swiftplex_plugin_crashes", "Isolated children that died", { $0.crashes }),
        ("swiftplex_plugin_restarts", "Isolated children restarted", { $0.restarts }),
    ]

    /// A plugin instance: its bot and its name (unique within the bot).
    private struct PluginKey: Hashable { var bot: String; var instance: String }

    private func updatePlugins(_ statuses: [(bot: String, status: PluginStatus)]) {
        pluginSeries.withLockedValue { all in
            let names = Set(statuses.map { PluginKey(bot: $0.bot, instance: $0.status.name) })
            for (name, series) in all where !names.contains(name) {
                for c in series.counters.values { registry.unregisterCounter(c.counter) }
                registry.unregisterGauge(series.queueDepth)
                for g in series.conditions.values { registry.unregisterGauge(g) }
                all[name] = nil
            }
            for (bot, status) in statuses {
                let key = PluginKey(bot: bot, instance: status.name)
                let labels = [("bot", bot), ("instance", status.name)]
                var series = all[key] ?? PluginSeries(
                    counters: Dictionary(uniqueKeysWithValues: Self.pluginCounters.map { c in
                        (c.name, (counter: registry.makeCounter(descriptor: MetricNameDescriptor(metricName: c.name, unitName: "total", helpText: c.help), labels: labels), last: 0))
                    }),
                    queueDepth: registry.makeGauge(descriptor: MetricNameDescriptor(metricName: "swiftplex_plugin_queue", unitName: "depth",
                                                                                    helpText: "Events waiting for the instance or being handled"), labels: labels),
                    conditions: Dictionary(uniqueKeysWithValues: PluginCondition.allCases.map { c in
                        (c, registry.makeGauge(descriptor: MetricNameDescriptor(metricName: "swiftplex_plugin", unitName: "condition",
                                                                                helpText: "1 for what the instance is doing now"),
                                               labels: labels + [("condition", c.rawValue)]))
                    }))
                for c in Self.pluginCounters {
                    guard let entry = series.counters[c.name] else { continue }
                    let now = c.value(status.stats)
                    if now < entry.last {
                        entry.counter.reset()
                        entry.counter.increment(by: Int64(now))
                    } else if now > entry.last {
                        entry.counter.increment(by: Int64(now - entry.last))
                    }
                    series.counters[c.name] = (entry.counter, now)
                }
                series.queueDepth.set(Int64(status.queueDepth))
                for (condition, gauge) in series.conditions { gauge.set(Int64(condition == status.condition ? 1 : 0)) }
                all[key] = series
            }
        }
    }

    // MARK: Process

    struct ProcessFigures {
        var residentBytes: Int?
        var openFDs: Int?
        var maxFDs: Int?
    }

    /// Resident memory (`/proc/self/statm`), open descriptors (`/proc/self/fd`) and their limit.
    static func processFigures() -> ProcessFigures {
        var figures = ProcessFigures()
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) {
            let fields = statm.split(separator: " ")
            if fields.count > 1, let pages = Int(fields[1]) { figures.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            figures.openFDs = max(0, entries.count - 1)  // less the descriptor of the listing itself
        }
        // "Max open files            1024                 524288               files"
        if let limits = try? String(contentsOfFile: "/proc/self/limits", encoding: .utf8),
           let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) {
            let fields = line.dropFirst("Max open files".count).split(separator: " ")
            if let soft = fields.first.flatMap({ Int($0) }) { figures.maxFDs = soft }
        }
        return figures
    }
}

/// One bot's engine series (labelled `bot="<name>"`), counted from its typed chat events.
final class EngineMetrics: Sendable {
    let bot: String
    private let received: Counter
    private let sent: Counter
    private let delivered: Counter
    private let contactRequests: Counter
    private let relayLatency: DurationHistogram
    private let peerLatency: DurationHistogram
    private let outbox: Gauge
    private let relaysConnected: Gauge
    private let relayDisconnects: Counter
    private let engineRunning: Gauge
    private let relays = NIOLockedValueBox(HostMetrics.RelayState())
    /// The host's: bumped when a relay of this engine connects or goes.
    let changes: StateChanges

    init(registry: PrometheusCollectorRegistry, bot: String, changes: StateChanges) {
        self.bot = bot
        self.changes = changes
        let labels = [("bot", bot)]
        func d(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: unit, helpText: help)
        }
        received = registry.makeCounter(descriptor: d("swiftplex_engine_messages_received", "total", "Messages received from contacts"), labels: labels)
        sent = registry.makeCounter(descriptor: d("swiftplex_engine_messages_sent", "total", "Messages to contacts that reached their relay"), labels: labels)
        delivered = registry.makeCounter(descriptor: d("swiftplex_engine_messages_delivered", "total",
                                                       "Messages to contacts confirmed received by the contact (delivery receipt)"), labels: labels)
        contactRequests = registry.makeCounter(descriptor: d("swiftplex_engine_contact_requests", "total", "Contact requests received at the bot's address"),
                                               labels: labels)
        let latency = d("swiftplex_engine_delivery", "seconds", "Time from a message being made to reaching its relay (stage=relay) or its contact (stage=peer)")
        relayLatency = registry.makeDurationHistogram(descriptor: latency, labels: labels + [("stage", "relay")], buckets: HostMetrics.latencyBuckets)
        peerLatency = registry.makeDurationHistogram(descriptor: latency, labels: labels + [("stage", "peer")], buckets: HostMetrics.latencyBuckets)
        outbox = registry.makeGauge(descriptor: d("swiftplex_engine_outbox", "pending", "Envelopes in the agent's outbox waiting for their relay"), labels: labels)
        relaysConnected = registry.makeGauge(descriptor: d("swiftplex_engine_relays", "connected",
                                                           "Relays the engine is connected to (its own and contacts' relays it sends to)"), labels: labels)
        relayDisconnects = registry.makeCounter(descriptor: d("swiftplex_engine_relay_disconnects", "total", "Relay connections lost"), labels: labels)
        engineRunning = registry.makeGauge(descriptor: d("swiftplex_engine", "running", "1 while the chat engine runs"), labels: labels)
    }

    /// Counts what one chat event says (called for every event, in order).
    func observe(_ event: ChatEvent, now: Date = Date()) {
        switch event {
        case let .newChatItems(new):
            let n = new.chatItems.count(where: { $0.chatItem.chatDir == .directRcv })
            if n > 0 { received.increment(by: Int64(n)) }
        case let .chatItemsStatusesUpdated(updated):
            for item in updated.chatItems {
                let meta = item.chatItem.meta
                let elapsed = Duration.milliseconds(Int64(max(0, now.timeIntervalSince(meta.createdAt.date)) * 1000))
                switch meta.itemStatus {
                case .sndSent:
                    sent.increment()
                    relayLatency.record(elapsed)
                case .sndRcvd:
                    delivered.increment()
                    peerLatency.record(elapsed)
                default: break
                }
            }
        case .receivedContactRequest:
            contactRequests.increment()
        case let .hostConnected(_, host):
            let count = relays.withLockedValue { r -> Int in
                r.connected.insert(host)
                r.lost.remove(host)
                return r.connected.count
            }
            relaysConnected.set(Int64(count))
            changes.bump()
        case let .hostDisconnected(_, host):
            let count = relays.withLockedValue { r -> Int in
                if r.connected.remove(host) != nil { r.lost.insert(host) }
                return r.connected.count
            }
            relaysConnected.set(Int64(count))
            relayDisconnects.increment()
            changes.bump()
        default:
            break
        }
    }

    var relayState: HostMetrics.RelayState { relays.withLockedValue { $0 } }

    /// Scrape-time values: whether the engine runs, and the agent's outbox read from its database.
    func scraped(engineRunning running: Bool, outboxPending: Int?) {
        engineRunning.set(Int64(running ? 1 : 0))
        if let outboxPending { outbox.set(Int64(outboxPending)) }
    }
}

/// A counter of state changes that tasks can wait on: ``wait(after:)`` returns once the counter
/// has moved past what the waiter saw, so a change between a check and the wait is never missed.
final class StateChanges: Sendable {
    private struct State {
        var generation = 0
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private let state = NIOLockedValueBox(State())

    var generation: Int { state.withLockedValue { $0.generation } }

    func bump() {
        let ready = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            s.generation += 1
            let woken = s.waiters.map(\.1)
            s.waiters = []
            return woken
        }
        for c in ready { c.resume() }
    }

    /// Returns once the generation is past `seen` (at once if it already is).
    func wait(after seen: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { s -> Bool in
                if s.generation > seen { return true }
                s.waiters.append((seen, c))
                return false
            }
            if now { c.resume() }
        }
    }
}
