// The fuzzing driver (docs/security.md "Fuzzing").
//
// Fuzz build (`make fuzz`: `-sanitize=fuzzer,address -DFUZZING`):
//     swiftplex-fuzz TARGET [libFuzzer flags and corpus directories]
// Normal build (no sanitizer):
//     swiftplex-fuzz list                      the targets
//     swiftplex-fuzz seeds DIR                 writes DIR/<target>/seed-NNN from real encodings
//     swiftplex-fuzz run TARGET FILE|DIR...    replays inputs (a crash's reproducer, a corpus)
#if canImport(Glibc)
import Glibc
#endif
#if FUZZING
import CFuzzer
#endif
import Foundation

func usage() -> Never {
    let names = fuzzTargets.map { $0.name }.joined(separator: " ")
    #if FUZZING
    FileHandle.standardError.write(Data("usage: swiftplex-fuzz TARGET [libFuzzer flags] [CORPUS...]\ntargets: \(names)\n".utf8))
    #else
    FileHandle.standardError.write(Data("usage: swiftplex-fuzz list | seeds DIR | run TARGET FILE|DIR...\ntargets: \(names)\n".utf8))
    #endif
    exit(2)
}

func target(named name: String) -> any FuzzTarget.Type {
    guard let t = fuzzTargets.first(where: { $0.name == name }) else { usage() }
    return t
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { usage() }

#if FUZZING
selectedTarget = target(named: arguments[1])
// The driver sees the program name followed by the libFuzzer arguments (the target name removed).
var driverArguments: [UnsafeMutablePointer<CChar>?] = [strdup(arguments[0])] + arguments.dropFirst(2).map { strdup($0) } + [nil]
var driverArgc = CInt(arguments.count - 1)
let status = driverArguments.withUnsafeMutableBufferPointer { buffer -> CInt in
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
    return LLVMFuzzerRunDriver(&driverArgc, &argv) { data, size in
        runSelectedTarget(data, size)
    }
}
exit(status)
#else
switch arguments[1] {
case "list":
    for t in fuzzTargets { print("\(t.name)\t\(t.summary)") }
case "seeds":
    guard arguments.count == 3 else { usage() }
    do {
        try writeSeeds(into: arguments[2])
    } catch {
        FileHandle.standardError.write(Data("swiftplex-fuzz: \(error)\n".utf8))
        exit(1)
    }
case "run":
    guard arguments.count >= 4 else { usage() }
    let t = target(named: arguments[2])
    var count = 0
    for path in arguments.dropFirst(3) {
        for file in inputFiles(path) {
            guard let data = FileManager.default.contents(atPath: file) else {
                FileHandle.standardError.write(Data("swiftplex-fuzz: cannot read \(file)\n".utf8))
                exit(1)
            }
            t.fuzz([UInt8](data))
            count += 1
        }
    }
    print("\(t.name): \(count) inputs, no crash")
default:
    usage()
}
#endif
