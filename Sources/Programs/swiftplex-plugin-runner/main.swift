import Foundation
import PluginHost

// The child process of `isolation: process`: `swiftplex-plugin-runner <plugin.so>`, spawned by
// the host with frames on stdin/stdout (see PluginHost's Frames). Not meant to be run by hand.
let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: swiftplex-plugin-runner <plugin.so> (started by swiftplex for isolation: process)\n".utf8))
    exit(64)
}
exit(PluginChild.run(path: arguments[1]))
