import Foundation

/// One fuzz target: a decoder fed arbitrary bytes, with the checks that must hold for any input
/// (no trap, and where the module has an encoder: what decodes re-encodes to the same value).
protocol FuzzTarget: Sendable {
    static var name: String { get }
    /// One line for `swiftplex-fuzz list` and the docs.
    static var summary: String { get }
    /// Runs one input. A broken invariant is a `fuzzCheck` failure (a trap libFuzzer reports).
    static func fuzz(_ data: [UInt8])
    /// Valid inputs made with the real encoders (the committed seed corpus).
    static func seeds() throws -> [[UInt8]]
}

/// Every target, in the order `make fuzz` runs them.
let fuzzTargets: [any FuzzTarget.Type] = [
    RelayBlockTarget.self,
    RelayTransmissionTarget.self,
    AgentEnvelopeTarget.self,
    RatchetFrameTarget.self,
    LinksTarget.self,
    ChatCommandTarget.self,
    JSONTarget.self,
    HostConfigJSONTarget.self,
    PluginKitJSONTarget.self,
    YAMLConfigTarget.self,
    PluginFramesTarget.self,
    GroupMessageTarget.self,
    ChannelMessageTarget.self,
]

/// A property every input must keep; a failure stops the fuzzer with the input saved.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    if !condition() { fatalError("fuzz invariant broken: \(message())", file: file, line: line) }
}

/// The target `swiftplex-fuzz TARGET` runs (set once, before the driver starts).
nonisolated(unsafe) var selectedTarget: (any FuzzTarget.Type)?

func runSelectedTarget(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { [UInt8](UnsafeBufferPointer(start: $0, count: size)) } ?? []
    selectedTarget?.fuzz(bytes)
    return 0
}

/// Reads a byte stream as fields; every read past the end yields zeros/empty, so any input is usable.
struct ByteReader {
    var bytes: ArraySlice<UInt8>

    init(_ bytes: [UInt8]) { self.bytes = bytes[...] }

    var isAtEnd: Bool { bytes.isEmpty }

    mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

    mutating func uint16() -> UInt16 { UInt16(byte()) << 8 | UInt16(byte()) }

    mutating func uint32() -> UInt32 { UInt32(uint16()) << 16 | UInt32(uint16()) }

    mutating func take(_ n: Int) -> [UInt8] {
        let k = min(n, bytes.count)
        defer { bytes = bytes.dropFirst(k) }
        return Array(bytes.prefix(k))
    }

    /// A field with a 2-byte length prefix (truncated at the end of the input).
    mutating func chunk() -> [UInt8] { take(Int(uint16())) }

    mutating func rest() -> [UInt8] { take(bytes.count) }
}

func text(_ data: [UInt8]) -> String { String(decoding: data, as: UTF8.self) }

func inputFiles(_ path: String) -> [String] {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else { return [path] }
    let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
}

/// Writes each target's seeds as DIR/<target>/seed-NNN (the directory's old seeds replaced).
func writeSeeds(into directory: String) throws {
    let fm = FileManager.default
    for t in fuzzTargets {
        let dir = directory + "/" + t.name
        try? fm.removeItem(atPath: dir)
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let seeds = try t.seeds()
        for (i, seed) in seeds.enumerated() {
            let name = dir + "/" + "seed-" + String(format: "%03d", i)
            guard fm.createFile(atPath: name, contents: Data(seed)) else { throw CocoaError(.fileWriteUnknown) }
        }
        // Each seed replays clean before it is committed.
        for seed in seeds { t.fuzz(seed) }
        print("\(t.name): \(seeds.count) seeds")
    }
}

#if FUZZING
/// libFuzzer's archive brings its own `main`, which needs this symbol to link; `main.swift` calls
/// the driver itself, so this is the same entry under libFuzzer's usual name.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    runSelectedTarget(data, size)
}
#endif
