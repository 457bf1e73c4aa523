/// Swiftplex's version: reported by the admin API and written into backup archives.
public enum SwiftplexVersion {
    public static let current = "0.1.0-dev"
}
