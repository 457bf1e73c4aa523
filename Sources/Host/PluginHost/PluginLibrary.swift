import CSwiftplexPlugin
import Foundation
import SwiftplexBase

/// Why a plugin could not be loaded. Each case names the file and what to do about it.
public struct PluginLoadError: CodedError {
    public enum Code: Sendable, Hashable {
        case fileNotFound
        case notLoadable
        case missingEntryPoint
        case abiMismatch
        case badDescriptor
    }

    public let code: Code
    public let path: String
    public let message: String

    public var description: String { "\(path): \(message)" }
}

/// What a plugin says about itself in its descriptor, copied out of the shared object.
public struct PluginInfo: Sendable, Equatable {
    public var name: String
    public var version: String
    public var description: String
    /// Event types the plugin wants; `["*"]` for all.
    public var events: [String]
    /// JSON Schema of its `config:`, or nil to accept any object.
    public var configSchema: String?

    public func wants(_ eventType: String) -> Bool {
        eventType == PluginEvents.timer || events.contains("*") || events.contains(eventType)
    }

    init(name: String, version: String, description: String, events: [String], configSchema: String?) {
        self.name = name
        self.version = version
        self.description = description
        self.events = events
        self.configSchema = configSchema
    }
}

/// Event type names the host itself produces.
public enum PluginEvents {
    /// A timer the plugin started has fired.
    public static let timer = "swiftplex.timer"
}

/// A plugin shared object opened with dlopen, with its descriptor checked.
///
/// Each load opens a private copy of the file, so a rebuilt plugin at the same path loads as new
/// code on reload (dlopen would otherwise hand back the already-mapped old one). Libraries are
/// never closed: Swift and C runtimes register state that does not survive dlclose, and a
/// reload keeps the old code for rollback anyway.
public final class PluginLibrary: @unchecked Sendable {
    public let path: String
    public let info: PluginInfo
    let descriptor: UnsafePointer<swiftplex_plugin_descriptor>

    /// Opens the plugin at `path` and validates its descriptor.
    public static func load(path: String) throws(PluginLoadError) -> PluginLibrary {
        func fail(_ code: PluginLoadError.Code, _ message: String) -> PluginLoadError {
            PluginLoadError(code: code, path: path, message: message)
        }
        guard FileManager.default.fileExists(atPath: path) else {
            throw fail(.fileNotFound, "no such plugin file")
        }
        let (directory, copy) = try privateCopy(of: path)
        defer {
            unlink(copy)
            rmdir(directory)
        }
        guard let handle = dlopen(copy, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw fail(.notLoadable, "cannot load: \(reason.replacingOccurrences(of: copy, with: path))")
        }
        guard let symbol = dlsym(handle, SWIFTPLEX_PLUGIN_ENTRY_SYMBOL) else {
            throw fail(.missingEntryPoint, "not a Swiftplex plugin: it does not export `\(SWIFTPLEX_PLUGIN_ENTRY_SYMBOL)`")
        }
        let entry = unsafeBitCast(symbol, to: swiftplex_plugin_entry_fn.self)
        guard let descriptor = entry() else {
            throw fail(.badDescriptor, "`\(SWIFTPLEX_PLUGIN_ENTRY_SYMBOL)` returned no descriptor")
        }
        let d = descriptor.pointee
        guard d.abi_version == SWIFTPLEX_PLUGIN_ABI_VERSION else {
            throw fail(.abiMismatch, "built for plugin ABI version \(d.abi_version), this host speaks version \(SWIFTPLEX_PLUGIN_ABI_VERSION); rebuild it against this host's swiftplex_plugin.h")
        }
        guard d.struct_size >= UInt32(MemoryLayout<swiftplex_plugin_descriptor>.size) else {
            throw fail(.badDescriptor, "descriptor is \(d.struct_size) bytes, expected \(MemoryLayout<swiftplex_plugin_descriptor>.size)")
        }
        guard let namePtr = d.name, let versionPtr = d.version else {
            throw fail(.badDescriptor, "descriptor has no name or version")
        }
        guard d.start != nil, d.handle_event != nil, d.stop != nil, d.free_string != nil else {
            throw fail(.badDescriptor, "descriptor lacks one of start, handle_event, stop, free_string")
        }
        let name = String(cString: namePtr)
        guard !name.isEmpty else { throw fail(.badDescriptor, "descriptor has an empty name") }
        var events = ["*"]
        if let e = d.events {
            guard let list = try? JSONValueDecoder().decode([String].self, from: JSONValue.parse(String(cString: e))) else {
                throw fail(.badDescriptor, "descriptor `events` is not a JSON array of strings")
            }
            events = list
        }
        let schema = d.config_schema.map { String(cString: $0) }
        let info = PluginInfo(name: name, version: String(cString: versionPtr),
                              description: d.description.map { String(cString: $0) } ?? "",
                              events: events, configSchema: schema)
        return PluginLibrary(path: path, info: info, descriptor: descriptor)
    }

    private init(path: String, info: PluginInfo, descriptor: UnsafePointer<swiftplex_plugin_descriptor>) {
        self.path = path
        self.info = info
        self.descriptor = descriptor
    }

    /// Copies the file into a fresh private directory so that each load maps fresh code.
    ///
    /// The directory is made by `mkdtemp` (a random name, created 0700 by this call, so nobody
    /// else can have made it or can enter it), checked to be a real directory owned by us with
    /// mode 0700, and the copy is created inside with `O_EXCL | O_NOFOLLOW`: no other local user
    /// can swap the file between the copy and `dlopen`. Both are removed once the code is mapped.
    static func privateCopy(of path: String) throws(PluginLoadError) -> (directory: String, file: String) {
        func fail(_ message: String) -> PluginLoadError {
            PluginLoadError(code: .notLoadable, path: path, message: message)
        }
        let directory = try makePrivateDirectory()
        let target = directory + "/" + (path as NSString).lastPathComponent
        let source = open(path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else {
            rmdir(directory)
            throw fail("cannot read the plugin file: \(String(cString: strerror(errno)))")
        }
        defer { close(source) }
        let out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o500)
        guard out >= 0 else {
            rmdir(directory)
            throw fail("cannot copy the plugin file: \(String(cString: strerror(errno)))")
        }
        defer { close(out) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                unlink(target)
                rmdir(directory)
                throw fail("cannot read the plugin file: \(String(cString: strerror(errno)))")
            }
            var offset = 0
            while offset < n {
                let w = buffer.withUnsafeBytes { write(out, $0.baseAddress! + offset, n - offset) }
                if w < 0 {
                    if errno == EINTR { continue }
                    unlink(target)
                    rmdir(directory)
                    throw fail("cannot copy the plugin file: \(String(cString: strerror(errno)))")
                }
                offset += w
            }
        }
        return (directory, target)
    }

    /// A new directory only this user can enter (`<tmp>/swiftplex-plugin-XXXXXX`, mode 0700),
    /// verified after creation.
    static func makePrivateDirectory() throws(PluginLoadError) -> String {
        let base = FileManager.default.temporaryDirectory.path
        var template = Array((base.hasSuffix("/") ? base : base + "/").appending("swiftplex-plugin-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        guard made else {
            throw PluginLoadError(code: .notLoadable, path: base, message: "cannot create a private directory for plugin copies in \(base): \(String(cString: strerror(errno)))")
        }
        let directory = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var st = stat()
        guard lstat(directory, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == geteuid(), st.st_mode & 0o777 == 0o700 else {
            rmdir(directory)
            throw PluginLoadError(code: .notLoadable, path: directory, message: "the private directory for plugin copies is not a 0700 directory of this user")
        }
        return directory
    }
}
