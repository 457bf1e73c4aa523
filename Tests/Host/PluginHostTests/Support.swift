import Foundation
import Logging
import TestSupport
@testable import PluginHost

/// Where the built products are: next to the test binary (or `SWIFTPLEX_BIN_DIR`).
enum Build {
    static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    static var testPlugin: String { directory.appendingPathComponent("libswiftplex-test-plugin.so").path }
    static var runner: URL { directory.appendingPathComponent("swiftplex-plugin-runner") }
    static var header: String {
        Repository.path("Sources/PluginSDK/CSwiftplexPlugin/include").path
    }
}

var quiet: Logger {
    var l = Logger(label: "plugin-test")
    l.logLevel = .critical
    return l
}

/// A fresh temporary directory (0700); the test removes it.
func temporaryDirectory() -> URL { TemporaryDirectory(prefix: "swiftplex-plugins-test").url }

/// The commands plugins ran, in order, as the host's command runner saw them.
final class CommandLog: Sendable {
    private let log: AsyncLog<String>
    /// A copy handed to `wait`'s predicate (which must not read the live log under its lock).
    private let frozen: [String]?

    init() {
        log = AsyncLog()
        frozen = nil
    }

    private init(frozen: [String]) {
        log = AsyncLog()
        self.frozen = frozen
    }

    var runner: CommandRunner {
        { [log] line in
            log.append(line)
            return #"{"type":"cmdOk"}"#
        }
    }

    var all: [String] { frozen ?? log.all }

    /// The `n` of every `/seen <tag> {"type":"t","n":N}` line for `tag`, in order.
    func seen(_ tag: String) -> [Int] {
        all.compactMap { line -> Int? in
            guard line.hasPrefix("/seen \(tag) "), let r = line.range(of: #""n":"#) else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }
    }

    /// Waits until `predicate` holds (events are handled on other threads): checked as each
    /// command arrives, no polling.
    func wait(timeout: Duration = .seconds(20), until predicate: @escaping @Sendable (CommandLog) -> Bool) async throws {
        try await log.waitUntil("the commands the test expects", timeout: timeout) { predicate(CommandLog(frozen: $0)) }
    }
}

/// A spec for the C test plugin with a fixed config JSON.
func testSpec(_ name: String, config: String, isolation: PluginSpec.Isolation = .inProcess, path: String = Build.testPlugin,
              timeout: Duration = .seconds(5), queueLimit: Int = 1000,
              limits: PluginSpec.IsolationLimits = .init()) -> PluginSpec {
    PluginSpec(name: name, path: path, isolation: isolation, timeout: timeout, queueLimit: queueLimit,
               backoff: .init(initial: .milliseconds(50), max: .seconds(1)), configFingerprint: config, limits: limits,
               configure: { _ in .success(config) })
}

func event(_ n: Int, _ extra: String = "") -> String { #"{"type":"newChatItems","n":\#(n)\#(extra)}"# }

/// Compiles a C plugin variant with the toolchain's clang (or cc) into `dir`.
func compilePlugin(_ source: String, named name: String, in dir: URL) throws -> String {
    let c = dir.appendingPathComponent("\(name).c")
    let so = dir.appendingPathComponent("lib\(name).so")
    try source.write(to: c, atomically: true, encoding: .utf8)
    let compiler = FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") ? "cc" : "clang"
    let result = try runProgram(compiler, ["-shared", "-fPIC", "-I", Build.header, "-o", so.path, c.path])
    guard result.termination == .exit(0) else { throw TestFailure("cannot compile \(name): \(result.errors)") }
    return so.path
}
