import Foundation

/// The repository the tests run from, found from this file's place in it
/// (`Tests/Support/TestSupport/Repository.swift`): for tests that read the docs, the shipped
/// configuration, the plugin ABI header or fixtures.
public enum Repository {
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `relative` inside the repository (`"docs/groups.md"`, `"config/bot.yaml"`).
    public static func path(_ relative: String) -> URL { root.appendingPathComponent(relative) }
}
