import CSwiftplexPlugin
import Foundation

/// Makes the C descriptor for a Swift plugin type. A plugin library exports it with one function:
///
///     @_cdecl("swiftplex_plugin_entry")
///     public func swiftplexPluginEntry() -> UnsafeRawPointer {
///         PluginExport.descriptor(for: Greeter.self)
///     }
///
/// The descriptor and its strings are made once per type and stay alive while the library is
/// loaded. Up to `maxTypesPerImage` plugin types can be exported from one image (a library
/// exports one; tests may start several).
public enum PluginExport {
    public static let maxTypesPerImage = 8

    /// The descriptor of `P` as `const swiftplex_plugin_descriptor *`.
    public static func descriptor<P: Plugin>(for type: P.Type) -> UnsafeRawPointer {
        UnsafeRawPointer(registry.descriptor(for: P.self))
    }

    static let registry = Registry()

    /// The descriptors made so far, one per plugin type, and the start function of each slot.
    final class Registry: @unchecked Sendable {
        // @unchecked: every field is read and written under `lock`.
        private let lock = NSLock()
        private var byType: [ObjectIdentifier: UnsafeMutablePointer<swiftplex_plugin_descriptor>] = [:]
        private var starters: [(UnsafePointer<swiftplex_host_api>?, String) throws -> AnyPluginInstance] = []

        func descriptor<P: Plugin>(for type: P.Type) -> UnsafeMutablePointer<swiftplex_plugin_descriptor> {
            lock.withLock {
                if let d = byType[ObjectIdentifier(type)] { return d }
                let slot = starters.count
                starters.append { host, config in
                    let context = try PluginContext(host: host)
                    return try PluginInstance<P>.start(context: context, configJSON: config)
                }
                var routes = Routes<P>()
                P.routes(&routes)
                let d = UnsafeMutablePointer<swiftplex_plugin_descriptor>.allocate(capacity: 1)
                d.initialize(to: swiftplex_plugin_descriptor(
                    abi_version: SWIFTPLEX_PLUGIN_ABI_VERSION,
                    struct_size: UInt32(MemoryLayout<swiftplex_plugin_descriptor>.size),
                    name: UnsafePointer(strdup(P.name)),
                    version: UnsafePointer(strdup(P.version)),
                    description: UnsafePointer(strdup(P.description)),
                    events: UnsafePointer(strdup(JSONValue.array(routes.events.map { .string($0) }).text)),
                    config_schema: P.configSchema.map { UnsafePointer(strdup($0.json.text)) },
                    start: startThunk(slot),
                    handle_event: handleEvent,
                    stop: stopInstance,
                    free_string: { free($0) }
                ))
                byType[ObjectIdentifier(type)] = d
                return d
            }
        }

        func start(slot: Int, host: UnsafePointer<swiftplex_host_api>?, config: String) throws -> AnyPluginInstance {
            let starter = lock.withLock { starters.indices.contains(slot) ? starters[slot] : nil }
            guard let starter else { throw PluginError(.plugin, "more than \(PluginExport.maxTypesPerImage) plugin types in one image") }
            return try starter(host, config)
        }
    }

    typealias StartFn = @convention(c) (UnsafePointer<swiftplex_host_api>?, UnsafePointer<CChar>?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> UnsafeMutableRawPointer?

    /// A C start function per slot: C function pointers carry no context, so the slot number is
    /// what tells them which plugin type to make.
    static func startThunk(_ slot: Int) -> StartFn {
        switch slot {
        case 0: { PluginExport.startSlot(0, $0, $1, $2) }
        case 1: { PluginExport.startSlot(1, $0, $1, $2) }
        case 2: { PluginExport.startSlot(2, $0, $1, $2) }
        case 3: { PluginExport.startSlot(3, $0, $1, $2) }
        case 4: { PluginExport.startSlot(4, $0, $1, $2) }
        case 5: { PluginExport.startSlot(5, $0, $1, $2) }
        case 6: { PluginExport.startSlot(6, $0, $1, $2) }
        case 7: { PluginExport.startSlot(7, $0, $1, $2) }
        default: { PluginExport.startSlot(-1, $0, $1, $2) }
        }
    }

    static func startSlot(_ slot: Int, _ host: UnsafePointer<swiftplex_host_api>?, _ config: UnsafePointer<CChar>?,
                      _ errorOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> UnsafeMutableRawPointer? {
        do {
            let instance = try registry.start(slot: slot, host: host, config: config.map { String(cString: $0) } ?? "{}")
            return Unmanaged.passRetained(instance).toOpaque()
        } catch {
            errorOut?.pointee = strdup("\(error)")
            return nil
        }
    }

    static let handleEvent: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 = { raw, event, errorOut in
        guard let raw, let event else {
            errorOut?.pointee = strdup("handle_event needs an instance and an event")
            return Int32(SWIFTPLEX_ERROR)
        }
        let instance = Unmanaged<AnyPluginInstance>.fromOpaque(raw).takeUnretainedValue()
        do {
            try instance.handle(eventJSON: String(cString: event))
            return Int32(SWIFTPLEX_OK)
        } catch {
            errorOut?.pointee = strdup("\(error)")
            return Int32(SWIFTPLEX_ERROR)
        }
    }

    static let stopInstance: @convention(c) (UnsafeMutableRawPointer?) -> Void = { raw in
        guard let raw else { return }
        let instance = Unmanaged<AnyPluginInstance>.fromOpaque(raw).takeRetainedValue()
        instance.stop()
    }
}
