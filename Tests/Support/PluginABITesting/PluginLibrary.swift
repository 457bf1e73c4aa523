import CSwiftplexPlugin
import Foundation

/// A plugin reached through its C descriptor only — loaded from a shared object with dlopen, or
/// given as a descriptor pointer — and driven the way the host drives it.
public final class PluginLibrary: @unchecked Sendable {
    // @unchecked: immutable after init; the descriptor is read-only.
    public let descriptor: UnsafePointer<swiftplex_plugin_descriptor>
    private let handle: UnsafeMutableRawPointer?

    public struct LoadError: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// dlopens `path` and calls its `swiftplex_plugin_entry`.
    public init(path: String) throws {
        guard let h = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw LoadError(description: "cannot load \(path): \(String(cString: dlerror()))")
        }
        guard let sym = dlsym(h, SWIFTPLEX_PLUGIN_ENTRY_SYMBOL) else {
            throw LoadError(description: "\(path) has no \(SWIFTPLEX_PLUGIN_ENTRY_SYMBOL)")
        }
        let entry = unsafeBitCast(sym, to: swiftplex_plugin_entry_fn.self)
        guard let d = entry() else { throw LoadError(description: "\(path): the entry point returned NULL") }
        handle = h
        descriptor = d
    }

    /// Uses a descriptor made in this process (`PluginExport.descriptor(for:)`).
    public init(descriptor: UnsafeRawPointer) {
        handle = nil
        self.descriptor = descriptor.assumingMemoryBound(to: swiftplex_plugin_descriptor.self)
    }

    public var abiVersion: UInt32 { descriptor.pointee.abi_version }
    public var structSize: UInt32 { descriptor.pointee.struct_size }
    public var name: String { Self.string(descriptor.pointee.name) }
    public var version: String { Self.string(descriptor.pointee.version) }
    public var summary: String { Self.string(descriptor.pointee.description) }
    /// The `events` JSON array, parsed.
    public var events: [String] {
        (try? JSONSerialization.jsonObject(with: Data(Self.string(descriptor.pointee.events).utf8))) as? [String] ?? []
    }
    /// The config schema JSON text, if any.
    public var configSchema: String? { descriptor.pointee.config_schema.map { String(cString: $0) } }

    /// Starts an instance; a refusal comes back as the plugin's error message.
    public func start(host: TestHost, config: String) -> Result<RunningPlugin, StartFailure> {
        var error: UnsafeMutablePointer<CChar>?
        guard let start = descriptor.pointee.start else { return .failure(StartFailure(message: "no start function")) }
        guard let instance = start(host.api, config, &error) else {
            return .failure(StartFailure(message: take(error) ?? "(no message)"))
        }
        return .success(RunningPlugin(library: self, instance: instance))
    }

    public struct StartFailure: Error, CustomStringConvertible, Sendable {
        public let message: String
        public var description: String { message }
    }

    func take(_ p: UnsafeMutablePointer<CChar>?) -> String? {
        guard let p else { return nil }
        defer { descriptor.pointee.free_string?(p) }
        return String(cString: p)
    }

    static func string(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }
}

/// A started instance.
public final class RunningPlugin: @unchecked Sendable {
    // @unchecked: the instance pointer is used from one test at a time, as the ABI requires.
    let library: PluginLibrary
    private var instance: UnsafeMutableRawPointer?

    init(library: PluginLibrary, instance: UnsafeMutableRawPointer) {
        self.library = library
        self.instance = instance
    }

    /// Feeds one event; nil if handled, else the plugin's error message.
    @discardableResult
    public func handle(_ eventJSON: String) -> String? {
        guard let instance, let handle = library.descriptor.pointee.handle_event else { return "stopped" }
        var error: UnsafeMutablePointer<CChar>?
        let rc = handle(instance, eventJSON, &error)
        let message = library.take(error)
        return rc == Int32(SWIFTPLEX_OK) ? nil : (message ?? "(no message)")
    }

    /// Stops and frees the instance.
    public func stop() {
        guard let instance else { return }
        library.descriptor.pointee.stop?(instance)
        self.instance = nil
    }

    deinit { stop() }
}
