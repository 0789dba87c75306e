import NIOConcurrencyHelpers
import Synchronization

/// Which tests ran when: what a stall report and a stopped run name.
final class RunningTests: Sendable {
    static let shared = RunningTests()

    struct Span: Sendable {
        let id: Int
        let name: String
        let start: ContinuousClock.Instant

        /// From the start until now (a span is asked about only after it ended, or while it runs).
        var interval: ClosedRange<ContinuousClock.Instant> { start...ContinuousClock.now }
    }

    private struct Record {
        let name: String
        let start: ContinuousClock.Instant
        var end: ContinuousClock.Instant?
    }

    private let records = NIOLockedValueBox<[Int: Record]>([:])
    private let lastID = Synchronization.Atomic<Int>(0)

    func begin(_ name: String) -> Span {
        let id = lastID.add(1, ordering: .relaxed).newValue
        let start = ContinuousClock.now
        records.withLockedValue { $0[id] = Record(name: name, start: start) }
        return Span(id: id, name: name, start: start)
    }

    func end(_ span: Span) {
        records.withLockedValue { $0[span.id]?.end = .now }
    }

    /// The tests that ran at some moment of `interval`, in the order they started.
    func names(during interval: ClosedRange<ContinuousClock.Instant>) -> [String] {
        records.withLockedValue { records in
            records.values.filter { $0.start <= interval.upperBound && ($0.end ?? .now) >= interval.lowerBound }
                .sorted { $0.start < $1.start }.map(\.name)
        }
    }

    /// The tests that have not ended.
    func runningNames() -> [String] {
        records.withLockedValue { records in records.values.filter { $0.end == nil }.sorted { $0.start < $1.start }.map(\.name) }
    }
}
