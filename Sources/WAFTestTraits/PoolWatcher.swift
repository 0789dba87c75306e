import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Measures, for as long as tests run, how late a 100 ms sleep on the concurrency pool wakes. A
/// wake-up more than `limit` late means every pool thread was held that long: each test that ran
/// meanwhile is told (`OffPool`), so that starvation fails the run by name instead of making some
/// real-time test flaky.
///
/// A plain thread sleeps the same way beside it, as a control: when the machine, not the pool, is
/// what ran late (hundreds of test threads and a compiler on two cores once delayed every wake-up
/// by 2.4 s), the control is late too. Only the pool's lateness beyond the control's is a stall.
final class PoolWatcher: Sendable {
    static let shared = PoolWatcher(limit: .milliseconds(limitMilliseconds()))

    struct Stall: Sendable, Equatable {
        let interval: ClosedRange<ContinuousClock.Instant>
        var length: Duration { interval.upperBound - interval.lowerBound }
    }

    static let tick = Duration.milliseconds(100)
    let limit: Duration
    private struct State {
        var stalls: [Stall] = []
        /// When the sleep now in progress should end.
        var dueAt: ContinuousClock.Instant?
        /// The control thread's late wake-ups (over a tick late), from due to woke.
        var controlLate: [ClosedRange<ContinuousClock.Instant>] = []
    }
    private let state = NIOLockedValueBox(State())

    init(limit: Duration, control: Bool = true) {
        self.limit = limit
        Task.detached { [self] in
            while true {
                let due = ContinuousClock.now + Self.tick
                state.withLockedValue { $0.dueAt = due }
                try? await Task.sleep(until: due, clock: .continuous)
                record(due: due, woke: .now)
            }
        }
        guard control else { return }
        let thread = Thread { [self] in
            while true {
                let due = ContinuousClock.now + Self.tick
                usleep(UInt32(Self.tick.components.attoseconds / 1_000_000_000_000))
                recordControl(due: due, woke: .now)
            }
        }
        thread.start()
    }

    /// Records the sleep that was due at `due` and woke at `woke`: a stall when it woke over the
    /// limit later than the control did meanwhile.
    func record(due: ContinuousClock.Instant, woke: ContinuousClock.Instant) {
        state.withLockedValue { state in
            state.dueAt = nil
            let controlLate = state.controlLate.map { Self.overlap($0, due...woke) }.max() ?? .zero
            if woke - due - controlLate > limit { state.stalls.append(Stall(interval: due...woke)) }
        }
    }

    /// Records a wake-up of the control thread.
    func recordControl(due: ContinuousClock.Instant, woke: ContinuousClock.Instant) {
        guard woke - due > Self.tick else { return }
        state.withLockedValue { $0.controlLate.append(due...woke) }
    }

    static func overlap(_ a: ClosedRange<ContinuousClock.Instant>, _ b: ClosedRange<ContinuousClock.Instant>) -> Duration {
        let start = max(a.lowerBound, b.lowerBound), end = min(a.upperBound, b.upperBound)
        return end > start ? end - start : .zero
    }

    /// The stalls that overlap `interval`. A stall still in progress (the watcher's sleep is over
    /// the limit already) is waited for, on the caller's thread, which is the test's own.
    func stalls(during interval: ClosedRange<ContinuousClock.Instant>) -> [Stall] {
        let clock = ContinuousClock()
        let giveUp = clock.now + .seconds(60)
        while let due = state.withLockedValue({ $0.dueAt }), clock.now - due > limit, clock.now < giveUp {
            usleep(10_000)
        }
        return Self.overlapping(state.withLockedValue { $0.stalls }, interval)
    }

    static func overlapping(_ stalls: [Stall], _ interval: ClosedRange<ContinuousClock.Instant>) -> [Stall] {
        stalls.filter { $0.interval.overlaps(interval) }
    }

    /// `WAF_POOL_STALL_LIMIT_MS`, else 2,000.
    private static func limitMilliseconds() -> Int64 {
        getenv("WAF_POOL_STALL_LIMIT_MS").flatMap { Int64(String(cString: $0)) } ?? 2000
    }
}
