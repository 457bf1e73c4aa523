import Foundation
import Testing
import TestSupport

/// `SpawnedProcess`: children started with posix_spawn for the host's isolated plugins and for the
/// tests, instead of Foundation's `Process.run()` (which can crash with many descriptors open).
@Suite struct SpawnedProcessTests {
    @Test func anExitStatusAndASignalAreTold() async throws {
        let exited = try SpawnedProcess("/bin/sh", ["-c", "exit 3"], stdin: .null, stdout: .null, stderr: .null)
        #expect(await exited.exited() == SpawnedProcess.Termination.exit(3))
        #expect(!exited.isRunning)

        let sleeper = try SpawnedProcess("/bin/sleep", ["60"], stdin: .null, stdout: .null, stderr: .null)
        #expect(sleeper.isRunning)
        sleeper.signal(SIGKILL)
        #expect(sleeper.waitUntilExit() == SpawnedProcess.Termination.signal(SIGKILL))
        #expect(sleeper.termination?.status == SIGKILL)
    }

    @Test func aMissingProgramIsATypedError() {
        #expect(throws: SpawnError(.notExecutable, "")) {
            _ = try SpawnedProcess("/nonexistent/program", [])
        }
    }

    @Test func theChildGetsItsArgumentsEnvironmentAndDirectory() throws {
        try withTemporaryDirectory { dir in
        let result = try runProgram("/bin/sh", ["-c", "echo \"$1|$SPAWN_TEST|$(pwd)\"; echo err >&2", "sh", "one two"],
                                    in: dir.url, environment: ["SPAWN_TEST": "yes", "PATH": "/usr/bin:/bin"])
        #expect(result.termination == SpawnedProcess.Termination.exit(0))
        #expect(result.output == "one two|yes|\(dir.url.resolvingSymlinksInPath().path)\n")
        #expect(result.errors == "err\n")
        }
    }

    /// The reason this type exists: with thousands of descriptors open (as in a busy bot host or a
    /// full test run) a child still starts, and inherits none of them — not even ones opened
    /// without close-on-exec.
    @Test func withThousandsOfDescriptorsOpenTheChildInheritsNone() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let wanted: rlim_t = 6000
        if limit.rlim_cur < wanted, limit.rlim_max >= wanted {
            limit.rlim_cur = wanted
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur >= wanted, "the open-file limit (\(limit.rlim_cur)) is too low for this test")

        let opened = (0..<3000).map { _ in open("/dev/null", O_RDONLY) }  // no O_CLOEXEC
        defer { opened.forEach { if $0 >= 0 { close($0) } } }
        #expect(opened.allSatisfy { $0 >= 0 })

        // `ls` lists its own descriptors: 0, 1, 2 and the one it reads the directory with.
        let result = try runProgram("/bin/ls", ["-1", "/proc/self/fd"])
        #expect(result.termination == SpawnedProcess.Termination.exit(0))
        let listed = Set(result.output.split(separator: "\n").compactMap { Int32($0) })
        #expect(listed.isSubset(of: [0, 1, 2, 3]), "the child inherited \(listed.subtracting([0, 1, 2, 3]).sorted().prefix(10))")
        #expect(listed.isSuperset(of: [0, 1, 2]))
    }
}
