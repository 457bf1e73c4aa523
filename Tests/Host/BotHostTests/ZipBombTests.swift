@testable import BotHost
import Foundation
import SwiftplexBackup
import SwiftplexBase
import Testing
import TestSupport
import ZIPFoundation

/// Archives that lie about their size: `swiftplex restore` and `/_db import` stop at the lie and
/// leave nothing behind.
@Suite struct ZipBombTests {
    /// A backup whose two databases are 8 MiB of zeros each (a few KiB compressed), with every
    /// header then rewritten to declare 4 KiB: each entry inflates 2,048 times past what it says.
    static func bomb(in dir: URL) throws -> URL {
        let staging = dir.appendingPathComponent("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        for name in ["bot_chat.db", "bot_agent.db"] {
            try Data(count: 8 << 20).write(to: staging.appendingPathComponent(name))
        }
        let url = dir.appendingPathComponent("bomb.zip")
        try BackupArchive.write(BackupArchive.Manifest(databases: ["bot_chat.db", "bot_agent.db"], files: [], config: nil),
                                from: staging, configFile: nil, to: url)
        var bytes = [UInt8](try Data(contentsOf: url))
        func le32(_ at: Int, _ value: UInt32) { for i in 0..<4 { bytes[at + i] = UInt8((value >> (8 * UInt32(i))) & 0xff) } }
        func name(at: Int, length: Int) -> String { String(decoding: bytes[at..<(at + length)], as: UTF8.self) }
        var patched = 0
        var i = 0
        while i + 46 < bytes.count {
            if bytes[i] == 0x50, bytes[i + 1] == 0x4b, bytes[i + 2] == 3, bytes[i + 3] == 4 {  // local header
                let length = Int(bytes[i + 26]) | Int(bytes[i + 27]) << 8
                if name(at: i + 30, length: length).hasPrefix("data/") { le32(i + 22, 4096); patched += 1 }
            } else if bytes[i] == 0x50, bytes[i + 1] == 0x4b, bytes[i + 2] == 1, bytes[i + 3] == 2 {  // central directory
                let length = Int(bytes[i + 28]) | Int(bytes[i + 29]) << 8
                if name(at: i + 46, length: length).hasPrefix("data/") { le32(i + 24, 4096); patched += 1 }
            }
            i += 1
        }
        #expect(patched == 4)
        try Data(bytes).write(to: url)
        try FileManager.default.removeItem(at: staging)
        return url
    }

    @Test func aRestoreOfAZipBombIsRefusedAndLeavesNothingBehind() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let archive = try Self.bomb(in: dir)
        let data = dir.appendingPathComponent("data")
        let error = await Blocking.run("restore") { () -> String? in
            do { _ = try HostBackup.restore(from: archive, dataDirectory: data, configFile: nil, replace: false); return nil } catch {
                return "\(error)"
            }
        }
        #expect(error?.contains("inflates beyond") == true, "\(error ?? "restored")")
        // Nothing unpacked stays: neither in the data directory nor beside it.
        let left = try FileManager.default.contentsOfDirectory(atPath: data.path).filter { !$0.hasSuffix(".lock") }
        #expect(left.isEmpty, "\(left)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["bomb.zip", "data"])
    }

    @Test func anImportOfAZipBombIsRefusedAndLeavesNothingBehind() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let archive = try Self.bomb(in: dir)
        let engine = dir.appendingPathComponent("engine")
        let error = await Blocking.run("import") { () -> String? in
            do { _ = try DatabaseArchive.prepareImport(from: archive, prefix: engine.appendingPathComponent("x").path); return nil } catch {
                return "\(error)"
            }
        }
        #expect(error?.contains("inflates beyond") == true, "\(error ?? "imported")")
        #expect(try FileManager.default.contentsOfDirectory(atPath: engine.path).isEmpty)
    }

    /// An honest entry bigger than what may be unpacked is refused before a byte is written.
    @Test func anEntryBeyondTheBudgetIsRefusedBeforeItIsWritten() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let staging = dir.appendingPathComponent("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        try Data(count: 64 << 10).write(to: staging.appendingPathComponent("big.db"))
        let url = dir.appendingPathComponent("honest.zip")
        try BackupArchive.write(BackupArchive.Manifest(databases: [], files: ["big.db"], config: nil), from: staging, configFile: nil, to: url)
        let (archive, _) = try BackupArchive.open(url)
        let entry = try #require(archive["data/big.db"])
        let target = dir.appendingPathComponent("out.db")
        var budget: Int64 = 1000
        #expect(throws: BackupError.self) { try BackupArchive.extract(entry, of: archive, to: target, budget: &budget) }
        #expect(!FileManager.default.fileExists(atPath: target.path))
        budget = 1 << 20
        try BackupArchive.extract(entry, of: archive, to: target, budget: &budget)
        #expect(budget == (1 << 20) - (64 << 10))
        #expect(try Data(contentsOf: target).count == 64 << 10)
    }
}
