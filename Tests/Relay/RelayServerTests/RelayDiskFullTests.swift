import Foundation
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// A small tmpfs for the relay's data directory: a real full disk (ENOSPC, SQLITE_FULL).
/// Mounting needs root (CAP_SYS_ADMIN); where it is not allowed the test is reported as skipped.
struct SmallFilesystem {
    let url: URL

    static var canMount: Bool {
        guard getuid() == 0 else { return false }
        let probe = TempDirectory()
        defer { probe.cleanup() }
        guard let fs = try? SmallFilesystem(at: probe.url, size: "64k") else { return false }
        fs.unmount()
        return true
    }

    init(at url: URL, size: String) throws {
        self.url = url
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard Self.run(["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", url.path]) else {
            throw ProcessError(message: "cannot mount a tmpfs on \(url.path)")
        }
    }

    /// Gives the filesystem a new size (space returns, or goes).
    func resize(_ size: String) throws {
        guard Self.run(["-o", "remount,size=\(size)", url.path]) else { throw ProcessError(message: "cannot resize the tmpfs") }
    }

    func unmount() {
        Self.run([url.path], tool: "/bin/umount")
        try? FileManager.default.removeItem(at: url)
    }

    @discardableResult
    private static func run(_ arguments: [String], tool: String = "/bin/mount") -> Bool {
        (try? runProgram(tool, arguments))?.termination == .exit(0)
    }
}

@Suite(.timeLimit(.minutes(2))) struct RelayDiskFullTests {
    /// Faults: the disk fills up during SENDs. Each SEND is answered OK (stored, durable) or
    /// `ERR INTERNAL` (not stored); the relay keeps serving; when space returns SENDs succeed
    /// again; after a restart exactly the messages answered OK are there.
    @Test(.enabled(if: SmallFilesystem.canMount, "needs root to mount a small tmpfs"))
    func aFullDiskRefusesSendsWithATypedErrorAndServiceResumesWhenSpaceReturns() async throws {
        let temp = TempDirectory()
        let fs = try SmallFilesystem(at: temp.url, size: "1m")
        defer { fs.unmount() }
        let dataDirectory = fs.url.appendingPathComponent("relay")
        var accepted = Set<[UInt8]>()
        let queue = try await withRelay(dataDirectory: dataDirectory) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: q.senderId, senderKey: key)
            var refused = 0
            var sent = 0
            // 8 KiB bodies, unique: until the disk is full (a 1 MiB tmpfs holds fewer than 128).
            while refused == 0, sent < 500 {
                let body = Sodium.randomBytes(8192)
                sent += 1
                do {
                    try await c.sendMessage(senderId: q.senderId, key: key, body: body)
                    accepted.insert(body)
                } catch let e as RelayClientError where e.code == .relay(.internal) {
                    refused += 1
                }
            }
            #expect(refused == 1, "the disk never filled up (\(sent) sends)")
            // Still serving: answers and reads while the disk is full; a SEND is stored or refused
            // (SQLite may reuse WAL space the failed commit left), never answered OK unstored.
            try await c.ping()
            #expect(try await c.get(q) != nil)
            let whileFull = Sodium.randomBytes(8192)
            do {
                try await c.sendMessage(senderId: q.senderId, key: key, body: whileFull)
                accepted.insert(whileFull)
            } catch let e as RelayClientError where e.code == .relay(.internal) {}
            // Space returns: the next SEND is stored.
            try fs.resize("16m")
            let after = Sodium.randomBytes(8192)
            try await c.sendMessage(senderId: q.senderId, key: key, body: after)
            accepted.insert(after)
            await c.close()
            return q
        }
        // Exactly what was answered OK survived, nothing else.
        try await withRelay(dataDirectory: dataDirectory) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            var q = queue
            q.relay = relay.address
            var stored = Set<[UInt8]>()
            while let m = try await c.get(q) {
                stored.insert(m.body)
                try await c.acknowledge(q, messageId: m.id)
            }
            #expect(stored == accepted)
            #expect(relay.stats.storedMessages == 0)
            await c.close()
        }
    }
}
