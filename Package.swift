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
        .library(name: "simplex", type: .dynamic, targets: ["SimplexLib"]),
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

        // Layer 1: cryptographic primitives over libsodium.
        .target(name: "SwiftplexCrypto", dependencies: ["CSodium"]),

        // Layer 2: the relay wire protocol (pure values, no sockets).
        .target(
            name: "RelayProtocol",
            dependencies: [
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),

        // Layer 3: relay server and client.
        .target(
            name: "RelayServer",
            dependencies: [
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
        .target(
            name: "RelayClient",
            dependencies: [
                "RelayProtocol",
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // SQLite files of the engine (agent and chat databases).
        .target(name: "SwiftplexStorage", dependencies: [.product(name: "GRDB", package: "GRDB.swift")]),

        // Layer 4: the agent — duplex end-to-end encrypted connections over relay queues.
        .target(
            name: "Agent",
            dependencies: [
                "RelayClient",
                "SwiftplexStorage",
                "RelayProtocol",
                "SwiftplexCrypto",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Layer 5: the chat core — chat protocol, chat store, users, contacts, items.
        .target(
            name: "ChatCore",
            dependencies: [
                "Agent",
                "SwiftplexStorage",
                "SwiftplexCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Layer 6: the Chat API — SimpleX bot API command strings in, JSON out.
        .target(name: "ChatAPI", dependencies: ["ChatCore", "SwiftplexCrypto"]),

        // libsimplex: the SimpleX bot libraries' C ABI over the Chat API (product `simplex`).
        .target(
            name: "SimplexLib",
            dependencies: [
                "ChatAPI", "ChatCore", "CSodium", "RelayProtocol", "SwiftplexCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),

        // QR codes (ISO/IEC 18004 byte mode) and their terminal rendering; no dependencies.
        .target(name: "QRCode"),

        // Executables.
        .executableTarget(
            name: "swiftplex-chat",
            dependencies: [
                "ChatAPI", "ChatCore", "RelayProtocol", "QRCode",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "swiftplex-relay",
            dependencies: [
                "RelayServer",
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
                "RelayServer",
                "RelayClient",
                "SimplexLib",
                "ChatAPI",
                "ChatCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Tests.
        .testTarget(name: "SwiftplexCryptoTests", dependencies: ["SwiftplexCrypto"]),
        .testTarget(name: "QRCodeTests", dependencies: ["QRCode"]),
        .testTarget(
            name: "ChatClientTests",
            dependencies: [
                "swiftplex-relay", "swiftplex-chat", "QRCode", "RelayProtocol",
                .product(name: "GRDB", package: "GRDB.swift"),
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
        .testTarget(name: "ChatCoreTests", dependencies: ["ChatCore"]),
        .testTarget(name: "SimplexLibTests"),
        .testTarget(
            name: "ChatAPITests",
            dependencies: [
                "ChatAPI", "ChatCore", "RelayServer", "RelayProtocol",
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
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer",
                "RelayClient",
                "swiftplex-relay",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)
