// swift-tools-version:6.0
import PackageDescription

// The plugin dice-bot: `swift build` makes .build/debug/libdice-bot.so for the Swiftplex host.
let package = Package(
    name: "dice-bot",
    products: [
        .library(name: "dice-bot", type: .dynamic, targets: ["DiceBot"]),
    ],
    dependencies: [
        .package(name: "Swiftplex", path: "../.."),
    ],
    targets: [
        .target(name: "DiceBot", dependencies: [.product(name: "SwiftplexPluginKit", package: "Swiftplex")]),
    ]
)
