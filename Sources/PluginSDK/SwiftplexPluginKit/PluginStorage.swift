import CSwiftplexPlugin
import Foundation

/// Per-instance key-value storage kept by the host (in its database, across restarts).
/// `storage["key"]` reads and writes strings; `value(_:forKey:)` / `set(_:forKey:)` store
/// `Codable` values as JSON.
public struct PluginStorage: @unchecked Sendable {
    // @unchecked: an immutable pointer the host keeps valid until stop.
    let host: UnsafePointer<swiftplex_host_api>

    /// The stored string, or nil; assigning nil deletes the key.
    public subscript(key: String) -> String? {
        get {
            let t = host.pointee
            guard let raw = key.withCString({ t.storage_get!(t.context, $0) }) else { return nil }
            defer { t.free_string!(raw) }
            return String(cString: raw)
        }
        nonmutating set {
            _ = try? set(string: newValue, forKey: key)
        }
    }

    /// Stores a string (nil deletes); throws if the host refuses.
    public func set(string value: String?, forKey key: String) throws(PluginError) {
        let t = host.pointee
        let rc: Int32 = key.withCString { k in
            if let value { value.withCString { t.storage_set!(t.context, k, $0) } } else { t.storage_set!(t.context, k, nil) }
        }
        guard rc == Int32(SWIFTPLEX_OK) else { throw PluginError(.host, "the host could not store \(key)") }
    }

    /// Reads a JSON-encoded value; nil if absent. A stored value of another shape throws.
    public func value<T: Decodable>(_ type: T.Type, forKey key: String) throws(PluginError) -> T? {
        guard let text = self[key] else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        } catch {
            throw PluginError(.plugin, "stored \(key) is not a \(T.self): \(JSONValue.describe(error))")
        }
    }

    /// Stores a value as JSON (nil deletes the key).
    public func set<T: Encodable>(_ value: T?, forKey key: String) throws(PluginError) {
        guard let value else { return try set(string: nil, forKey: key) }
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch { throw PluginError(.plugin, "cannot encode \(key): \(error)") }
        try set(string: String(decoding: data, as: UTF8.self), forKey: key)
    }
}
