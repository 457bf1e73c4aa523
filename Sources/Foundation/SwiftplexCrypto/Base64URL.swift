/// Unpadded base64url (RFC 4648 §5), the encoding of relay fingerprints, IDs and link keys.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = Int8(i) }
        // Accept the standard alphabet too, and ignore padding.
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(alphabet[Int((buffer >> UInt32(bits)) & 0x3F)])
            }
        }
        if bits > 0 {
            out.append(alphabet[Int((buffer << UInt32(6 - bits)) & 0x3F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes unpadded or padded base64url (or standard base64); nil on any invalid character.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(string.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        var sawPadding = false
        for c in string.utf8 {
            if c == UInt8(ascii: "=") { sawPadding = true; continue }
            if sawPadding { return nil }
            let v = reverse[Int(c)]
            if v < 0 { return nil }
            buffer = (buffer << 6) | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        // A single leftover 6-bit group cannot encode a byte.
        if bits >= 6 { return nil }
        return out
    }
}
