/// What a queue is for, fixed when it is created (`NEW`), as SMP's messaging and contact queues.
///
/// - ``messaging``: one sender, who secures the queue (`SKEY`) or is given a key by the
///   recipient (`KEY`); after that only that sender's signed `SEND`s are accepted.
/// - ``contact``: a contact address. Anyone holding its link may `SEND` unsigned requests; nobody
///   can ever secure it (`SKEY` and `KEY` get `AUTH` and change nothing), so a stranger who reads
///   the sender ID from the public link cannot lock everyone else out.
public enum QueueMode: UInt8, Sendable, Hashable, CaseIterable {
    case messaging = 0x4D // "M"
    case contact = 0x43   // "C"

    /// The one-letter form stored by the relay and sent in `NEW`.
    public var letter: String { String(UnicodeScalar(rawValue)) }

    public init?(letter: String) {
        guard let scalar = letter.unicodeScalars.first, letter.unicodeScalars.count == 1,
              scalar.isASCII, let mode = QueueMode(rawValue: UInt8(scalar.value)) else { return nil }
        self = mode
    }
}
