/// SimpleX CLI's flags that `swiftplex-chat` does not support. A command line written for
/// `simplex-chat` that uses one stops at once (exit 64) with the flag named and why, instead of
/// running without what the flag asked for (a SOCKS proxy, an encryption key, …).
enum SimpleXFlags {
    /// Each refused flag (long and short spellings) and why.
    static let refused: [(names: [String], why: String)] = [
        (["-k", "--key"], "database encryption (SQLCipher keys) is not supported"),
        (["--xftp-server"], "file transfer (XFTP) is not implemented"),
        (["-x", "--socks-proxy", "--socks-mode", "--host-mode", "--required-host-mode", "--tor"],
         "connecting through a SOCKS5 proxy or Tor is not supported (connections are direct)"),
        (["--smp-proxy", "--smp-proxy-fallback"], "private message routing through proxy relays is not supported"),
        (["--smp-web-port", "--smp-web-port-servers"], "relay ports come from the relay addresses only"),
        (["--tcp-timeout"], "the network timeouts are not configurable"),
        (["-c", "--connections", "--log-hosts", "--log-agent", "--log-tls-errors"], "these logs are not available; use -l/--log-level"),
        (["--log-file"], "logs go to standard error only"),
        (["-q", "--queue-size"], "the internal queue sizes are not configurable"),
        (["--ha"], "highly available clients are not supported"),
        (["--relay-address-server"], "a chat relay's address is made on the profile's relays (-s)"),
        (["--create-bot-client-service"], "client service certificates are not supported"),
        (["-m", "--maintenance"], "maintenance mode is not supported (the chat starts with the program)"),
        (["--execute-log"], "-e prints the command's answer only"),
        (["--files-folder", "--temp-folder", "-f", "--allow-instant-files", "-a", "--auto-accept-files"], "file transfer is not implemented"),
        (["--reactions", "--mute", "-r", "--mark-read"], "the terminal's display options are not supported"),
        (["--migration-backup-path"], "database migrations make no backup file"),
    ]

    /// The options of `swiftplex-chat` that take a value: the word after one is its value, not a flag.
    static let ownOptionsWithValue: Set<String> = [
        "-d", "--database", "--data-dir", "--postgres", "-s", "--server", "--name", "--create-bot-display-name",
        "-l", "--log-level", "-p", "--chat-server-port", "-e", "--execute", "-t", "--time", "--device-name",
        "--ws-host", "--ws-token", "--ws-allow-origin", "--ws-allow-host",
    ]

    /// Why the command line cannot run, naming its first refused SimpleX flag; nil when it has none.
    static func refusal(in arguments: [String]) -> String? {
        var skipValue = false
        for argument in arguments {
            if skipValue { skipValue = false; continue }
            if argument == "--" { return nil }
            let flag = argument.hasPrefix("--") ? String(argument.prefix { $0 != "=" }) : argument
            if ownOptionsWithValue.contains(flag) {
                skipValue = flag == argument
                continue
            }
            if let entry = refused.first(where: { $0.names.contains(flag) }) {
                return "\(flag) is SimpleX CLI's flag but is not supported here: \(entry.why)"
            }
        }
        return nil
    }
}
