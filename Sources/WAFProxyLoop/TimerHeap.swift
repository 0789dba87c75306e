/// The loop's timers by deadline: a binary min-heap; ties keep no order. A cancelled timer stays
/// until its deadline comes up or the heap is compacted (`keep`), so what moves a deadline often
/// keeps one timer and, when it fires early, schedules the next (as `LoopStreamPool` and
/// `LoopTimeout` do).
struct TimerHeap {
    struct Entry {
        let deadline: UInt64
        let id: UInt64
    }

    private var entries: [Entry] = []

    var first: Entry? { entries.first }
    /// Timers in the heap, cancelled ones included.
    var count: Int { entries.count }

    mutating func insert(deadline: UInt64, id: UInt64) {
        entries.append(Entry(deadline: deadline, id: id))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func removeFirst() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(from: 0)
    }

    /// Keeps only the entries `live` says are, in heap order again (O(n)).
    mutating func keep(_ live: (Entry) -> Bool) {
        entries.removeAll { !live($0) }
        var index = entries.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count, entries[right].deadline < entries[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
