/// One thing wrong with a configuration, at a place in a file.
///
/// `line` and `column` are 1-based; both are 0 for a problem with the file as a whole (it cannot
/// be read), which prints as `FILE: message`.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public var message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    public init(file: String, at mark: ConfigMark, _ message: String) {
        self.init(file: file, line: mark.line, column: mark.column, message: message)
    }

    public var mark: ConfigMark { ConfigMark(line: line, column: column) }

    /// `FILE:LINE:COLUMN: message`, the form compilers use, so editors can jump to it.
    public var description: String {
        line == 0 ? "\(file): \(message)" : "\(file):\(line):\(column): \(message)"
    }
}

/// Every problem found in a configuration — collected, not just the first, so one run of
/// `swiftplex check-config` shows everything to fix.
public struct ConfigErrors: Error, Sendable, Hashable, CustomStringConvertible {
    /// Sorted by file, then position.
    public let problems: [ConfigProblem]

    public init(_ problems: [ConfigProblem]) {
        self.problems = problems.sorted {
            ($0.file, $0.line, $0.column, $0.message) < ($1.file, $1.line, $1.column, $1.message)
        }
    }

    /// One `FILE:LINE:COLUMN: message` per line, sorted by position.
    public var description: String {
        problems.map(\.description).joined(separator: "\n")
    }
}

/// Collects problems while a decoder walks a tree, so that one bad value does not hide the next.
struct ProblemSink {
    let file: String
    private(set) var problems: [ConfigProblem] = []

    init(file: String) { self.file = file }

    mutating func add(_ mark: ConfigMark, _ message: String) {
        problems.append(ConfigProblem(file: file, at: mark, message))
    }

    mutating func add(contentsOf other: [ConfigProblem]) { problems += other }

    var isEmpty: Bool { problems.isEmpty }
}
