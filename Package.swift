// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Swiftplex",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "swiftplex-relay", targets: ["swiftplex-relay"]),
        .executable(name: "swiftplex-bench", targets: ["swiftplex-bench"]),
        .executable(name: "swiftplex-chat", targets: ["swiftplex-chat"]),
        .library(name: "QRCode", targets: ["QRCode"]),
        .library(name: "RelayClient", targets: ["RelayClient"]),
        .library(name: "SwiftplexPluginTesting", targets: ["SwiftplexPluginTesting"]),
        .library(name: "simplex", type: .dynamic, targets: ["SimplexLib"]),
        .executable(name: "swiftplex", targets: ["swiftplex"]),
        .executable(name: "swiftplex-plugin-runner", targets: ["swiftplex-plugin-runner"]),
        // A plugin in C that the host's tests and the dispatch benchmark control.
        .library(name: "swiftplex-test-plugin", type: .dynamic, targets: ["SwiftplexTestPlugin"]),
        // The plugin SDK (linked into each plugin) and the built-in plugins, one lib<name>.so each.
        .library(name: "SwiftplexPluginKit", targets: ["SwiftplexPluginKit"]),
        .library(name: "PluginScaffold", targets: ["PluginScaffold"]),
        .library(name: "auto-accept", type: .dynamic, targets: ["AutoAccept"]),
        .library(name: "auto-reply", type: .dynamic, targets: ["AutoReply"]),
        .library(name: "broadcast", type: .dynamic, targets: ["Broadcast"]),
        .library(name: "channel-relay", type: .dynamic, targets: ["ChannelRelay"]),
        .library(name: "channel", type: .dynamic, targets: ["Channel"]),
        .library(name: "group-moderator", type: .dynamic, targets: ["GroupModerator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/weichsel/ZIPFoundation.git", from: "0.9.20"),
        // The PostgreSQL stores (SwiftplexSQLPostgres, RelayPostgres).
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        // System libraries (Debian: libsodium-dev, libyaml-dev).
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CLibYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),

        // The plugin ABI: one C header shared by the host, the SDK and plugins in any language.
        .systemLibrary(name: "CSwiftplexPlugin"),

        // Foundation: what every module shares — one JSON value type (parser, writer,
        // Codable bridge), `CodedError` and `Blocking`; no package dependencies (Foundation only
        // for `Blocking`'s threads). The plugin SDK compiles the same JSON files (symlinks in
        // Sources/PluginSDK/SwiftplexPluginKit/Base).
        .target(name: "SwiftplexBase"),
        // Child processes started with posix_spawn (closefrom in the child), not Foundation's
        // Process.run(), which can crash with many descriptors open (docs/testing.md, "Child processes").
        .target(name: "CSpawn"),
        .target(name: "SwiftplexSpawn", dependencies: ["CSpawn", "SwiftplexBase"]),

        // Foundation: cryptographic primitives over libsodium.
        .target(name: "SwiftplexCrypto", dependencies: ["CSodium", "SwiftplexBase"]),

        // Relay: the wire protocol (pure values, no sockets).
        .target(
            name: "RelayProtocol",
            dependencies: [
                "SwiftplexBase",
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),

        // Relay: server and client.
        .target(
            name: "RelayServer",
            dependencies: [
                "SwiftplexBase",
                "RelayProtocol",
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The relay's PostgreSQL store (`swiftplex-relay --store postgresql://…`): the store seam of
        // RelayServer over postgres-nio. Only the relay program, the benchmark and the relay's
        // tests link it.
        .target(
            name: "RelayPostgres",
            dependencies: [
                "RelayServer",
                "RelayProtocol",
                "SwiftplexSQL",
                "SwiftplexSQLPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "RelayClient",
            dependencies: [
                "SwiftplexBase",
                "RelayProtocol",
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // SQLite files of the engine (agent and chat databases).
        .target(name: "SwiftplexStorage", dependencies: ["SwiftplexBase", .product(name: "GRDB", package: "GRDB.swift")]),
        // One SQL layer over SQLite (GRDB) and PostgreSQL (SwiftplexSQLPostgres): stores written once for both.
        .target(name: "SwiftplexSQL", dependencies: ["SwiftplexStorage", .product(name: "GRDB", package: "GRDB.swift")]),
        // The PostgreSQL backend of SwiftplexSQL (`PostgresStore`: one thread and one connection
        // per store, a schema per store held with an advisory lock, SQLite DDL translated), and
        // the one PostgreSQL URL parser (`PostgresLocation`) the relay's store shares.
        .target(
            name: "SwiftplexSQLPostgres",
            dependencies: [
                "SwiftplexSQL",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Engine: the agent — duplex end-to-end encrypted connections over relay queues.
        .target(
            name: "Agent",
            dependencies: [
                "SwiftplexBase",
                "RelayClient",
                "SwiftplexStorage",
                "RelayProtocol",
                "SwiftplexCrypto",
                "SwiftplexSQL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Engine: the bot API's types as Swift values (User, Contact, ChatItem, ChatResponse,
        // ChatEvent, …), Codable to the JSON the simplex-chat package expects; open JSON is the
        // foundation's JSONValue.
        .target(name: "ChatModel", dependencies: ["SwiftplexBase"]),

        // Engine: the chat core — chat protocol, chat store (records on SwiftplexSQL), users, contacts,
        // items; works in ChatModel values and reports them (ChatResponse, ChatEvent).
        .target(
            name: "ChatCore",
            dependencies: [
                "ChatModel",
                "GroupProtocol",
                "ChannelProtocol",
                "SwiftplexBase",
                "Agent",
                "SwiftplexStorage",
                "SwiftplexCrypto",
                "SwiftplexBackup",
                "SwiftplexSQL",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Backups: the one archive format of `swiftplex backup` / `restore` and the Chat API's
        // `/_db export` / `/_db import` (SQLite's online backup API, a manifest, zip).
        .target(
            name: "SwiftplexBackup",
            dependencies: [
                "SwiftplexBase",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            ]
        ),

        // Groups: the group chat protocol (x.grp.*) as typed messages, roles and permissions, the
        // member lifecycle and introductions as a pure state machine, forwarding dedup; no I/O.
        .target(name: "GroupProtocol", dependencies: ["SwiftplexBase"]),
        .testTarget(name: "GroupProtocolTests", dependencies: ["GroupProtocol", "SwiftplexBase", "TestSupport"]),

        // Channels: groups with chat relays — typed x.grp.relay.* / x.member messages, relay and
        // channel links, RelayStatus, owner-signed elements (Ed25519), and the owner's, the chat
        // relay's and the subscriber's pure state machines; no I/O.
        .target(name: "ChannelProtocol", dependencies: ["SwiftplexBase", "GroupProtocol", "SwiftplexCrypto"]),
        .testTarget(name: "ChannelProtocolTests", dependencies: ["ChannelProtocol", "GroupProtocol", "SwiftplexBase", "SwiftplexCrypto"]),

        // Edges: the Chat API — the wire edge: SimpleX bot API command strings in, a typed command
        // run by the core, its typed response (and each event) encoded to JSON once.
        .target(name: "ChatAPI", dependencies: ["ChatCore", "ChatModel", "SwiftplexBase", "SwiftplexCrypto"]),

        // libsimplex: the SimpleX bot libraries' C ABI over the Chat API (product `simplex`).
        .target(
            name: "SimplexLib",
            dependencies: [
                "ChatAPI", "ChatCore", "ChatModel", "CSodium", "RelayProtocol", "SwiftplexBase", "SwiftplexCrypto", "SwiftplexStorage", "SwiftplexSQL", "SwiftplexSQLPostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),

        // SimpleX's WebSocket API over a ChatAPI (`swiftplex-chat -p`, the host's `ws_api`), and the
        // bearer-token and JSON-error helpers the host's admin API shares with it.
        .target(
            name: "ChatServer",
            dependencies: [
                "ChatAPI", "SwiftplexBase", "SwiftplexCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // The bot host's plugin runtime: loading, per-instance queues, isolation, storage, timers.
        .target(
            name: "PluginHost",
            dependencies: [
                "CSwiftplexPlugin",
                "SwiftplexBase",
                "SwiftplexSpawn",
                "SwiftplexSQL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .executableTarget(name: "swiftplex-plugin-runner", dependencies: ["PluginHost"]),

        // The test harness for plugin authors: a real bot host, relay and scripted contacts.
        .target(
            name: "SwiftplexPluginTesting",
            dependencies: [
                "BotHost", "ChatAPI", "ChatCore", "PluginHost", "RelayProtocol", "RelayServer", "SwiftplexBase", "SwiftplexSpawn",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),

        // The bot host: engine, optional embedded relay, contact address, plugins.
        .target(
            name: "BotHost",
            dependencies: [
                "Agent", "ChatAPI", "ChatCore", "ChatModel", "ChatServer", "PluginHost", "QRCode", "RelayServer", "RelayProtocol", "SwiftplexBackup", "SwiftplexBase",
                "SwiftplexSQL", "SwiftplexStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            ],
            resources: [.copy("Dashboard")]
        ),
        .target(
            name: "SwiftplexTestPlugin",
            dependencies: ["CSwiftplexPlugin"],
            path: "Tests/Fixtures/TestPlugin",
            publicHeadersPath: ".",
            cSettings: [.headerSearchPath("../../../Sources/PluginSDK/CSwiftplexPlugin/include")]
        ),
        // The plugin SDK: Swift over the C ABI, Foundation only (plugins share no Swift types with
        // the host). Its JSON is SwiftplexBase's own files, compiled in through symlinks (Base/).
        .target(name: "SwiftplexPluginKit", dependencies: ["CSwiftplexPlugin"]),
        // Writes a new out-of-tree plugin package (`swiftplex plugin new NAME`).
        .target(name: "PluginScaffold", dependencies: ["SwiftplexBase"]),
        // Test support only: drives a plugin's C descriptor directly with scripted Chat API
        // answers, for unit tests of plugin logic (end-to-end tests use SwiftplexPluginTesting).
        .target(name: "PluginABITesting", dependencies: ["CSwiftplexPlugin"], path: "Tests/Support/PluginABITesting"),
        // Test support only (Foundation and SwiftplexSpawn), shared by every test target: temporary directories,
        // inboxes that await events (no polling), child processes whose output lines are awaited.
        .target(name: "TestSupport", dependencies: ["SwiftplexSpawn", "SwiftplexSQL", "SwiftplexSQLPostgres"], path: "Tests/Support/TestSupport"),
        // Test support only: chat engines on an in-process relay (ChatAPITests, ChatModelTests,
        // ChatCoreTests, ChatServerTests, BotHostTests).
        .target(
            name: "ChatTestSupport",
            dependencies: [
                "Agent", "ChatAPI", "ChatCore", "ChatModel", "RelayProtocol", "RelayServer", "SwiftplexBase", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/Support/ChatTestSupport"
        ),
        // Built-in plugins.
        .target(name: "AutoAccept", dependencies: ["SwiftplexPluginKit"], path: "Plugins/AutoAccept"),
        .target(name: "AutoReply", dependencies: ["SwiftplexPluginKit"], path: "Plugins/AutoReply"),
        .target(name: "Broadcast", dependencies: ["SwiftplexPluginKit"], path: "Plugins/Broadcast"),
        .target(name: "ChannelRelay", dependencies: ["SwiftplexPluginKit"], path: "Plugins/ChannelRelay"),
        .target(name: "Channel", dependencies: ["SwiftplexPluginKit"], path: "Plugins/Channel"),
        .target(name: "GroupModerator", dependencies: ["SwiftplexPluginKit"], path: "Plugins/GroupModerator"),

        // The bot host's typed YAML configuration (libyaml only; no engine dependency).
        .target(name: "HostConfig", dependencies: ["CLibYAML", "SwiftplexBase"]),
        // QR codes (ISO/IEC 18004 byte mode) and their terminal rendering; only SwiftplexBase (CodedError).
        .target(name: "QRCode", dependencies: ["SwiftplexBase"]),

        // Executables.
        .executableTarget(
            name: "swiftplex",
            dependencies: [
                "BotHost", "ChatCore", "ChatServer", "HostConfig", "SwiftplexSQL", "SwiftplexSQLPostgres", "PluginHost", "PluginScaffold", "RelayProtocol", "QRCode", "SwiftplexStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "swiftplex-chat",
            dependencies: [
                "ChatAPI", "ChatCore", "ChatServer", "RelayProtocol", "QRCode", "SwiftplexBase", "SwiftplexSQL", "SwiftplexSQLPostgres", "SwiftplexStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "swiftplex-relay",
            dependencies: [
                "RelayServer",
                "RelayPostgres",
                "SwiftplexSQL",
                "SwiftplexSQLPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "swiftplex-bench",
            dependencies: [
                "Agent",
                "RelayServer",
                "RelayPostgres",
                "SwiftplexSQL",
                "SwiftplexSQLPostgres",
                "RelayClient",
                "SimplexLib",
                "ChatAPI",
                "ChatCore",
                "GroupProtocol",
                "PluginHost",
                "SwiftplexBase",
                "SwiftplexSpawn",
                "SwiftplexPluginTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Fuzzing (`make fuzz`, docs/security.md "Fuzzing"): one driver over every decoder that
        // reads bytes from a peer, a plugin or a config file. `make fuzz` builds it into .build-fuzz
        // with `-sanitize=fuzzer,address -DFUZZING` (libFuzzer); a normal build gets a plain
        // program that replays inputs and writes the seed corpora, without the sanitizer.
        .systemLibrary(name: "CFuzzer", path: "Fuzz/CFuzzer"),
        .executableTarget(
            name: "swiftplex-fuzz",
            dependencies: [
                "CFuzzer", "RelayProtocol", "SwiftplexBase", "SwiftplexCrypto", "Agent", "ChatAPI", "ChatCore", "HostConfig",
                "SwiftplexPluginKit", "PluginHost", "GroupProtocol", "ChannelProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Fuzz/Sources"
        ),

        // Tests.
        .testTarget(name: "SwiftplexBaseTests", dependencies: ["SwiftplexBase"]),
        .testTarget(name: "SwiftplexSQLTests", dependencies: ["SwiftplexSQL", "SwiftplexSQLPostgres", "ChatCore", "Agent", "TestSupport"]),
        .testTarget(name: "SwiftplexCryptoTests", dependencies: ["SwiftplexCrypto"]),
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"]),
        .testTarget(name: "QRCodeTests", dependencies: ["QRCode", "TestSupport"]),
        .testTarget(
            name: "ChatClientTests",
            dependencies: [
                "swiftplex-relay", "swiftplex-chat", "QRCode", "RelayProtocol", "SwiftplexBase", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "BotHostTests",
            dependencies: [
                "BotHost", "ChatAPI", "ChatCore", "ChatModel", "ChatServer", "ChatTestSupport", "PluginHost", "RelayServer", "SwiftplexBackup", "SwiftplexBase", "SwiftplexPluginTesting", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "SwiftplexCLITests",
            dependencies: [
                "SwiftplexPluginTesting", "RelayProtocol", "TestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PluginHostTests",
            dependencies: [
                "PluginHost", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "RelayProtocolTests",
            dependencies: [
                "RelayProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ChatModelTests",
            dependencies: [
                "ChatModel", "Agent", "ChatAPI", "ChatCore", "ChatTestSupport", "SwiftplexBase", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(name: "ChatCoreTests", dependencies: ["ChatCore", "ChatModel", "ChatAPI", "ChatTestSupport", "GroupProtocol", "SwiftplexBase", "SwiftplexSQL", "TestSupport", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(
            name: "ChatServerTests",
            dependencies: [
                "ChatServer", "ChatAPI", "ChatCore", "ChatModel", "ChatTestSupport", "RelayServer", "SwiftplexBase", "TestSupport",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "HostConfigTests", dependencies: ["HostConfig", "SwiftplexBase", "TestSupport"]),
        .testTarget(name: "SimplexLibTests", dependencies: ["TestSupport"]),
        .testTarget(name: "SwiftplexPluginKitTests", dependencies: ["SwiftplexPluginKit", "PluginABITesting", "CSwiftplexPlugin"]),
        // Loads the built plugin libraries (lib<name>.so) and the C example through the C ABI only.
        .testTarget(name: "PluginsTests", dependencies: ["CSwiftplexPlugin", "PluginABITesting", "PluginScaffold", "TestSupport"]),
        .testTarget(
            name: "ChatAPITests",
            dependencies: [
                "ChatAPI", "ChatCore", "ChatTestSupport", "RelayServer", "RelayProtocol", "Agent", "RelayClient", "SwiftplexBase", "TestSupport", "SwiftplexSQL",
                "SwiftplexSQLPostgres", "SwiftplexStorage",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "AgentTests",
            dependencies: [
                "Agent",
                "RelayServer",
                "RelayClient",
                "RelayProtocol",
                "TestSupport",
                "SwiftplexSQL",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer",
                "RelayPostgres",
                "SwiftplexSQL",
                "SwiftplexSQLPostgres",
                "RelayClient",
                "swiftplex-relay",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

// `Sources/` is grouped by layer, each layer using only those above it in this list: the
// foundation (JSON, errors, crypto, child processes), storage (SQLite and PostgreSQL), the relay,
// the engine (agent, chat model, group and channel protocols, chat core), its edges (the Chat API,
// its WebSocket server, libsimplex's C ABI), the plugin SDK (the ABI header, the Swift SDK, the
// scaffold), the bot host (with SwiftplexPluginTesting, the host as a harness for plugins' tests),
// and the programs. A module's folder is Sources/<layer>/<module>; tests, fixtures and plugins
// name theirs above. `make test` checks the direction (Tests/Support/layers.py).
let layers: KeyValuePairs<String, [String]> = [
    "Foundation": ["SwiftplexBase", "CSodium", "SwiftplexCrypto", "CSpawn", "SwiftplexSpawn", "QRCode"],
    "Storage": ["SwiftplexStorage", "SwiftplexSQL", "SwiftplexSQLPostgres", "SwiftplexBackup"],
    "Relay": ["RelayProtocol", "RelayServer", "RelayPostgres", "RelayClient"],
    "Engine": ["Agent", "ChatModel", "GroupProtocol", "ChannelProtocol", "ChatCore"],
    "Edges": ["ChatAPI", "ChatServer", "SimplexLib"],
    "PluginSDK": ["CSwiftplexPlugin", "SwiftplexPluginKit", "PluginScaffold"],
    "Host": ["CLibYAML", "HostConfig", "PluginHost", "BotHost", "SwiftplexPluginTesting"],
    "Programs": ["swiftplex", "swiftplex-relay", "swiftplex-chat", "swiftplex-bench", "swiftplex-plugin-runner"],
]
// `Tests/` mirrors it: a module's tests are in Tests/<layer>/<module>Tests (the programs' in
// Tests/Programs, the built-in plugins' in Tests/Plugins, the test helpers' own in Tests/Support).
let testLayers: KeyValuePairs<String, [String]> = [
    "Foundation": ["SwiftplexBaseTests", "SwiftplexCryptoTests", "QRCodeTests"],
    "Storage": ["SwiftplexSQLTests"],
    "Relay": ["RelayProtocolTests", "RelayServerTests"],
    "Engine": ["AgentTests", "ChatModelTests", "GroupProtocolTests", "ChannelProtocolTests", "ChatCoreTests"],
    "Edges": ["ChatAPITests", "ChatServerTests", "SimplexLibTests"],
    "PluginSDK": ["SwiftplexPluginKitTests"],
    "Host": ["HostConfigTests", "PluginHostTests", "BotHostTests"],
    "Programs": ["SwiftplexCLITests", "ChatClientTests"],
    "Plugins": ["PluginsTests"],
    "Support": ["TestSupportTests"],
]
for (root, table) in [("Sources", layers), ("Tests", testLayers)] {
    for (layer, modules) in table {
        for module in modules {
            guard let target = package.targets.first(where: { $0.name == module }) else {
                fatalError("Package.swift: the layer table names \(module), which is no target")
            }
            target.path = "\(root)/\(layer)/\(module)"
        }
    }
}
