import BotHost
import Foundation
import Logging
import NIOPosix
import RelayProtocol
import RelayServer
import SwiftplexBase
import SwiftplexSpawn

/// What a bench on a foreign engine runs besides the host: a relay of its own (the engine must
/// know it before the host starts), and for the WebSocket engine the `swiftplex-chat -p 0` process.
final class ForeignEngine: Sendable {
    let relay: RelayServer
    let choice: EngineChoice
    private let process: SpawnedProcess?

    private init(relay: RelayServer, choice: EngineChoice, process: SpawnedProcess?) {
        self.relay = relay
        self.choice = choice
        self.process = process
    }

    /// Nil for Swiftplex's embedded engine.
    static func start(_ engine: PluginTestBench.Engine, botName: String, directory: URL, logger: Logger) async throws -> ForeignEngine? {
        guard engine != .embedded else { return nil }
        let configuration = RelayConfiguration(dataDirectory: directory.appendingPathComponent("relay"), host: "127.0.0.1", port: 0)
        let relay = try await RelayServer.start(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        do {
            switch engine {
            case .embedded:
                return nil
            case .libsimplex:
                // The host gives the engine's user this relay (`/_relays`, as `relays:` does).
                return ForeignEngine(relay: relay, choice: .libsimplex(library: PluginTestBench.product("libsimplex.so")), process: nil)
            case .webSocket:
                let (process, port) = try await startChat(botName: botName, directory: directory, relay: relay.address)
                return ForeignEngine(relay: relay, choice: .websocket(url: "ws://127.0.0.1:\(port)", token: nil), process: process)
            }
        } catch {
            await relay.shutdown()
            throw error
        }
    }

    /// `swiftplex-chat -p 0` on the relay; returns once it prints the port it listens on. Its
    /// standard input is a pipe kept open until ``stop()`` (at the end of its input the terminal
    /// client would quit).
    private static func startChat(botName: String, directory: URL, relay: RelayAddress) async throws -> (SpawnedProcess, Int) {
        let executable = PluginTestBench.product("swiftplex-chat")
        let process = try SpawnedProcess(executable, ["--data-dir", directory.appendingPathComponent("engine").path, "--server", relay.description,
                                                      "--name", botName, "-p", "0"], stdin: .pipe)
        guard let stderr = process.standardError else { throw HarnessError("swiftplex-chat has no standard error") }
        let port: Int? = await Blocking.run("swiftplex-chat-port") {
            // Lines until "WebSocket API listening on 127.0.0.1:PORT" (or the end: it failed).
            var buffer = Data()
            while true {
                let chunk = stderr.availableData
                if chunk.isEmpty { return nil }
                buffer.append(chunk)
                let text = String(decoding: buffer, as: UTF8.self)
                if let range = text.range(of: #"WebSocket API listening on 127\.0\.0\.1:(\d+)"#, options: .regularExpression),
                   let port = Int(text[range].split(separator: ":").last ?? "") {
                    return port
                }
            }
        }
        guard let port else {
            process.signal(SIGKILL)
            _ = await process.exited()
            throw HarnessError("swiftplex-chat -p 0 exited before it listened (\(executable))")
        }
        // Its standard error is read to the end on a thread, so that it never blocks on a full pipe.
        Thread.detachNewThread { while !stderr.availableData.isEmpty {} }
        return (process, port)
    }

    func stop() async {
        if let process {
            try? process.standardInput?.close()
            process.signal(SIGTERM)
            _ = await process.exited()
        }
        await relay.shutdown()
    }
}
