import ChatAPI
import ChatCore
import ChatServer
import Logging
import NIOConcurrencyHelpers
import PluginHost
import RelayServer
import ServiceLifecycle

// The bot host's long-running parts, each a `Service` in the host's one `ServiceGroup`. The
// group shuts them down in the reverse of their order — for each bot (the last first) its plugins,
// then its engine; then the embedded relay — each finished before the next begins.

/// The embedded relay: serving since the host started (the address was made through it); stops
/// on graceful shutdown.
struct EmbeddedRelayService: Service {
    let relay: RelayServer

    func run() async throws {
        do { try await gracefulShutdown() } catch {}  // cancelled: stop all the same
        await stop()
    }

    func stop() async { await relay.shutdown() }
}

/// The chat engine (``BotEngine/run()``: Swiftplex's agent and event loop, or a foreign engine's
/// event reader) until graceful shutdown; then chat is stopped. The engine itself is closed by the
/// host once the group has finished.
struct EngineService: Service {
    let engine: any BotEngine
    let logger: Logger
    var running: @Sendable (Bool) -> Void = { _ in }

    func run() async throws {
        running(true)
        defer { running(false) }
        do {
            try await cancelWhenGracefulShutdown { [engine] in try await engine.run() }
        } catch is CancellationError {
        } catch {
            logger.critical("the chat engine stopped: \(error)")
            await stop()
            throw error
        }
        await stop()
    }

    func stop() async { _ = await engine.execute("/_stop") }
}

/// Dispatches a bot's chat events to its plugins, watches their timeouts and publishes its
/// profile when their command menu changes, until graceful shutdown; then stops every plugin.
struct PluginsService: Service {
    let bot: HostedBot

    func run() async throws {
        await cancelWhenGracefulShutdown { [bot] in await bot.servePlugins() }
        await stop()
    }

    func stop() async { await bot.stopPlugins() }
}

/// Reads the engine's events into the host's ``EventHub`` (for the plugins and the API
/// servers) until graceful shutdown.
struct EventHubService: Service {
    let hub: EventHub<EncodedChatEvent>

    func run() async throws {
        await cancelWhenGracefulShutdown { [hub] in await hub.run() }
    }
}

/// A one-time signal many tasks can wait for (the host's shutdown having finished).
final class Completion: Sendable {
    private struct State {
        var done = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLockedValue { s -> Bool in
                if s.done { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    func finish() {
        let waiting = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            s.done = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for c in waiting { c.resume() }
    }
}
