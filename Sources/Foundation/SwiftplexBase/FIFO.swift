/// A first-in-first-out queue over an array with a moving head: `append` and `popFirst` are
/// amortised O(1) however long the backlog (`Array.removeFirst` moves every element left), and a
/// taken element is released at once. Not synchronised: guard it like the array it wraps.
public struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    public init() {}

    public var isEmpty: Bool { head == storage.count }
    public var count: Int { storage.count - head }

    public mutating func append(_ element: Element) { storage.append(element) }

    public mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        storage[head] = nil
        head += 1
        if head == storage.count {
            // Drained: start over, keeping a modest buffer for the next burst.
            storage.removeAll(keepingCapacity: storage.count <= 4096)
            head = 0
        } else if head >= 1024, head * 2 >= storage.count {
            // At least half is taken: drop the taken part (each element moved at most once per halving).
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}

extension FIFO: Sendable where Element: Sendable {}
