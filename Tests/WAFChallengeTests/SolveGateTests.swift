import Synchronization
import Testing
import WAFTestTraits

@testable import WAFChallenge

/// One proof-of-work search at a time in the process (`SolveGate`): the others wait their turn,
/// in order, and one cancelled while it waits leaves the line.
final class Order: Sendable {
    private let items = Mutex<[String]>([])
    func withLock<T>(_ body: (inout [String]) -> T) -> T { items.withLock { body(&$0) } }
}

@Suite("Searches take turns", .offPool, .timeLimit(.minutes(1)))
struct SolveGateTests {
    @Test("a search cancelled before it gets in line throws at once")
    func cancelledBeforeTheLine() async throws {
        let gate = SolveGate()
        try await gate.enter()
        let late = Task {
            // Cancelled before it asks: the handler runs first and finds nobody in line.
            withUnsafeCurrentTask { $0?.cancel() }
            try await gate.enter()
        }
        await #expect(throws: CancellationError.self) { try await late.value }
        gate.leave()
    }

    @Test("a second search waits until the first leaves; one cancelled while waiting throws and holds no one up")
    func turns() async throws {
        let gate = SolveGate()
        let order = Order()
        try await gate.enter()
        let second = Task {
            try await gate.enter()
            order.withLock { $0.append("second") }
            gate.leave()
        }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = Task { try await gate.enter() }
        try await Task.sleep(for: .milliseconds(100))
        let third = Task {
            try await gate.enter()
            order.withLock { $0.append("third") }
            gate.leave()
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(order.withLock { $0 }.isEmpty, "nobody enters while the first is in")
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        order.withLock { $0.append("first") }
        gate.leave()
        try await second.value
        try await third.value
        #expect(order.withLock { $0 } == ["first", "second", "third"])
    }
}
