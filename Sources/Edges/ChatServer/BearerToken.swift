import Foundation
import SwiftplexCrypto

/// Bearer tokens for the WebSocket and admin APIs.
public enum BearerToken {
    /// A new random token: 32 bytes from libsodium, hex (64 characters).
    public static func generate() -> String {
        Sodium.randomBytes(32).map { String(format: "%02x", $0) }.joined()
    }

    /// The token a request presents: `Authorization: Bearer <token>`, or else `?token=<token>`
    /// in the URI (for WebSocket clients that cannot set headers).
    public static func presented(authorization: String?, uri: String) -> String? {
        if let a = authorization {
            let parts = a.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        guard let q = uri.firstIndex(of: "?") else { return nil }
        for pair in uri[uri.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == "token" {
                return String(kv[1]).removingPercentEncoding ?? String(kv[1])
            }
        }
        return nil
    }

    /// Compares a presented token with the expected one in time that depends only on their
    /// lengths (not on where they first differ).
    public static func matches(_ presented: String?, _ expected: String) -> Bool {
        let a = Array((presented ?? "").utf8), b = Array(expected.utf8)
        var diff = UInt8(a.count == b.count ? 0 : 1)
        // Walk the expected token's length whatever was presented, so timing reveals nothing
        // about the presented one's prefix.
        for i in 0..<b.count {
            diff |= (i < a.count ? a[i] : 0) ^ b[i]
        }
        return diff == 0 && !b.isEmpty
    }
}
