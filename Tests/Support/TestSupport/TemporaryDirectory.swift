import Foundation

/// A fresh directory under the system's temporary directory, created with mode 0700 (tests keep
/// keys and databases in it). It is removed by `cleanup()`, or at the end of
/// `withTemporaryDirectory { }`; never implicitly, so a test can hand its `url` around freely.
public final class TemporaryDirectory: Sendable {
    public let url: URL

    /// Creates `<tmp>/<prefix>-<UUID>`. A machine that cannot create a temporary directory cannot
    /// run any of these tests, so that is a precondition failure with the reason.
    public init(prefix: String = "swiftplex-test") {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            preconditionFailure("cannot create the temporary directory \(url.path): \(error)")
        }
    }

    public var path: String { url.path }

    /// `url/<component>` (nothing is created).
    public func appendingPathComponent(_ component: String) -> URL { url.appendingPathComponent(component) }

    /// Removes the directory and everything in it.
    public func cleanup() { try? FileManager.default.removeItem(at: url) }
}

/// Runs `body` with a fresh temporary directory and removes it afterwards, whatever `body` does.
public func withTemporaryDirectory<T>(prefix: String = "swiftplex-test", _ body: (TemporaryDirectory) async throws -> T) async rethrows -> T {
    let dir = TemporaryDirectory(prefix: prefix)
    defer { dir.cleanup() }
    return try await body(dir)
}

/// Synchronous form of `withTemporaryDirectory`.
public func withTemporaryDirectory<T>(prefix: String = "swiftplex-test", _ body: (TemporaryDirectory) throws -> T) rethrows -> T {
    let dir = TemporaryDirectory(prefix: prefix)
    defer { dir.cleanup() }
    return try body(dir)
}

/// Where the built products (executables, plugin libraries) are: next to the test binary, or in
/// `SWIFTPLEX_BIN_DIR`.
public enum BuildProducts {
    public static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    public static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
}
