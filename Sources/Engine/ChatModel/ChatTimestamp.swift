import Foundation

/// A moment as the bot API writes it: ISO 8601 in UTC with fractional seconds,
/// `2025-01-31T12:00:00.123Z`. Written with milliseconds (as the engine stores times), or with
/// six or nine digits when the value is finer; read with any number of fraction digits (or none).
public struct ChatTimestamp: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    public var seconds: Int64
    /// 0..<1_000_000_000.
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// The moment `date` stands for, to the millisecond.
    public init(_ date: Date) {
        let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        nanoseconds = Int32(ms - seconds * 1000) * 1_000_000
    }

    public static func now() -> ChatTimestamp { ChatTimestamp(Date()) }

    public var date: Date { Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9) }

    public static func < (l: ChatTimestamp, r: ChatTimestamp) -> Bool { (l.seconds, l.nanoseconds) < (r.seconds, r.nanoseconds) }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; nil for anything else.
    public init?(parsing text: String) {
        let b = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard (0x30...0x39).contains(b[i]) else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b.last == UInt8(ascii: "Z"),
              let year = num(0, 4), let month = num(5, 2), let day = num(8, 2),
              let hour = num(11, 2), let minute = num(14, 2), let second = num(17, 2),
              (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 61 else { return nil }
        var nanos = 0
        if b.count > 20 {
            let digits = b.count - 21
            guard b[19] == UInt8(ascii: "."), (1...9).contains(digits), let f = num(20, digits) else { return nil }
            nanos = f
            for _ in digits..<9 { nanos *= 10 }
        } else if b[19] != UInt8(ascii: "Z") {
            return nil
        }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        nanoseconds = Int32(nanos)
    }

    public var description: String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = Self.civil(fromDays: days)
        guard (0...9999).contains(y) else { return spelledOut }
        let n = Int(nanoseconds)
        let digits = n % 1_000_000 == 0 ? 3 : n % 1_000 == 0 ? 6 : 9
        let fraction = digits == 3 ? n / 1_000_000 : digits == 6 ? n / 1_000 : n
        // `YYYY-MM-DDTHH:MM:SS.` + fraction + `Z`, written into the string's own bytes.
        return String(unsafeUninitializedCapacity: 21 + digits) { out in
            func put(_ value: Int, _ width: Int, at start: Int) {
                var v = value
                for i in stride(from: start + width - 1, through: start, by: -1) {
                    out[i] = 0x30 + UInt8(v % 10)
                    v /= 10
                }
            }
            put(y, 4, at: 0)
            out[4] = UInt8(ascii: "-")
            put(m, 2, at: 5)
            out[7] = UInt8(ascii: "-")
            put(d, 2, at: 8)
            out[10] = UInt8(ascii: "T")
            put(rest / 3600, 2, at: 11)
            out[13] = UInt8(ascii: ":")
            put(rest / 60 % 60, 2, at: 14)
            out[16] = UInt8(ascii: ":")
            put(rest % 60, 2, at: 17)
            out[19] = UInt8(ascii: ".")
            put(fraction, digits, at: 20)
            out[20 + digits] = UInt8(ascii: "Z")
            return 21 + digits
        }
    }

    /// The same text built piece by piece: for years outside 0…9999.
    var spelledOut: String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = Self.civil(fromDays: days)
        var fraction: String
        switch nanoseconds {
        case let n where n % 1_000_000 == 0: fraction = String(n / 1_000_000)
            fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        case let n where n % 1_000 == 0: fraction = String(n / 1_000)
            fraction = String(repeating: "0", count: 6 - fraction.count) + fraction
        case let n: fraction = String(n)
            fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        }
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = String(y)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + "-\(two(m))-\(two(d))T\(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60)).\(fraction)Z"
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = ChatTimestamp(parsing: text) else {
            throw ModelDecodingError(.badTimestamp, type: "ChatTimestamp", value: text, path: decoder.codingPath)
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays days: Int64) -> (Int, Int, Int) {
        let z = Int(days) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
