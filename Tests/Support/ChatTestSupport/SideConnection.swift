import GRDB

/// A test's own connection to a database a running engine also writes (to inject a fault, or to
/// read what was stored). It waits for the engine's write transactions — which come at any time,
/// as events are handled — instead of failing at once with "database is locked".
public func sideConnection(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}
