import CSodium

/// Secret key material in memory of its own, overwritten with zeros (`sodium_memzero`) when its
/// last owner releases it.
///
/// Private keys keep their bytes here rather than in a `[UInt8]`: an array's buffer can be
/// shared by copies the key never sees, so zeroing it on release is not possible. What
/// ``bytes`` hands out is a copy that its caller owns (and may wipe with ``Sodium/wipe(_:)``).
public final class SecretBytes: @unchecked Sendable {
    // Written once in `init`, read-only afterwards, zeroed and freed in `deinit`: sharing
    // between threads is safe.
    private let storage: UnsafeMutableRawBufferPointer

    public init(_ bytes: [UInt8]) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        storage.initializeMemory(as: UInt8.self, repeating: 0)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress, source.count > 0 { storage.baseAddress!.copyMemory(from: base, byteCount: source.count) }
        }
        self.storage = storage
        count = bytes.count
    }

    public let count: Int

    /// A copy of the secret, owned by the caller.
    public var bytes: [UInt8] { Array(UnsafeRawBufferPointer(rebasing: storage[0..<count])) }

    /// Lends the secret without copying it.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    deinit {
        sodium_memzero(storage.baseAddress, storage.count)
        storage.deallocate()
    }
}
