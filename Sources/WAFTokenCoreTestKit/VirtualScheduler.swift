import Foundation
import WAFTokenCore

/// A `WAFScheduler` in virtual time, for tests.
///
/// Nothing runs until the test says so: `advance(by:)` runs every job due up to the target time in
/// time order (FIFO among equals) on the calling thread, state jobs under one lock that stands for
/// the serial state queue. Before each step it waits until all spawned work (fetches) has settled,
/// so results land at the virtual instant they were produced and every run is the same. Spawned
/// work that needs virtual time to pass awaits `sleep(for:)`, which releases the clock.
public final class VirtualScheduler: WAFScheduler, @unchecked Sendable {
    private enum Work {
        case state(@Sendable () -> Void)
        case delivery(@Sendable () -> Void)
        case resume(CheckedContinuation<Void, any Error>)
    }

    private struct Job {
        let at: MonotonicInstant
        let sequence: UInt64
        let work: Work
    }

    private let condition = NSCondition()
    private let executor = SerialQueueTaskExecutor(label: "virtual-scheduler.spawned")
    private let stateLock = NSLock()
    private var current = MonotonicInstant.origin
    private var jobs: [Job] = []
    private var sequence: UInt64 = 0
    /// Spawned work that is running (not sleeping in virtual time).
    private var outstanding = 0
    private var runCount = 0
    private var cancelledSleeps: Set<UInt64> = []

    /// The wall-clock time at virtual time zero.
    public let wallClockOrigin: Date
    /// How long to wait, in real time, for spawned work to settle before declaring the test broken.
    public let settleTimeout: TimeInterval

    public init(wallClockOrigin: Date = Date(timeIntervalSince1970: 1_700_000_000), settleTimeout: TimeInterval = 30) {
        self.wallClockOrigin = wallClockOrigin
        self.settleTimeout = settleTimeout
    }

    // MARK: WAFScheduler

    public var now: MonotonicInstant {
        condition.withLock { current }
    }

    public var wallClockNow: Date {
        wallClockOrigin.addingTimeInterval(now.sinceOrigin.seconds)
    }

    public func execute(_ work: @escaping @Sendable () -> Void) {
        _ = enqueue(.state(work), after: .zero)
    }

    /// Runs what is already due first, as a serial queue would, then `work`.
    public func executeAndWait<T: Sendable>(_ work: @Sendable () -> T) -> T {
        runUntilIdle()
        return stateLock.withLock { work() }
    }

    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> WAFCancellable {
        let id = enqueue(.state(work), after: delay)
        return WAFCancellable { [weak self] in self?.remove(id) }
    }

    public func deliver(_ work: @escaping @Sendable () -> Void) {
        _ = enqueue(.delivery(work), after: .zero)
    }

    public func spawn(_ work: @escaping @Sendable () async -> Void) -> WAFCancellable {
        condition.withLock { outstanding += 1 }
        // Not on the cooperative pool: a test that drives time blocks its thread, and on a small
        // machine that can be every thread of the pool.
        let task = Task(executorPreference: executor) { [self] in
            await work()
            condition.withLock {
                outstanding -= 1
                condition.broadcast()
            }
        }
        return WAFCancellable { task.cancel() }
    }

    // MARK: Driving time

    /// Runs everything due up to `now + duration`, then leaves the clock there.
    public func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    public func advance(to target: MonotonicInstant) {
        while let job = takeNextJob(upTo: target) {
            run(job)
        }
    }

    /// The machine sleeps for `duration`, or the process is stopped that long: every clock moves
    /// on and nothing runs meanwhile. What fell due runs at the next `advance` or `runUntilIdle`,
    /// as a timer on a clock that counts suspend fires on waking (TOK-9).
    public func suspend(for duration: Duration) {
        condition.withLock {
            waitUntilSettled()
            current = current + duration
        }
    }

    /// Runs everything due now, including what that work submits for now.
    public func runUntilIdle() {
        advance(by: .zero)
    }

    /// Moves to the next scheduled job and runs everything due then. Returns false if none.
    @discardableResult
    public func advanceToNextJob() -> Bool {
        guard let at = nextJobTime else { return false }
        advance(to: at)
        return true
    }

    /// How many jobs have run so far: a test can bound the work a provider makes it do, and fail
    /// on its own when a timer re-arms far too often instead of running on for minutes.
    public var jobsRun: Int { condition.withLock { runCount } }

    /// When the earliest pending job is due, or nil when none is pending.
    public var nextJobTime: MonotonicInstant? {
        condition.withLock {
            waitUntilSettled()
            return jobs.min(by: Self.earlier)?.at
        }
    }

    /// Blocks (in real time) until some job is pending; for tests where another thread submits work
    /// (a blocking `getToken()`) before the test drives time. Returns false after `timeout`.
    @discardableResult
    public func waitForPendingJob(timeout: TimeInterval = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return condition.withLock {
            while jobs.isEmpty {
                if !condition.wait(until: deadline) { return false }
            }
            return true
        }
    }

    /// Suspends spawned work for `duration` of virtual time (e.g. a fake fetch that takes 2 s).
    public func sleep(for duration: Duration) async throws {
        let id = condition.withLock { nextSequence() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                condition.withLock {
                    if cancelledSleeps.remove(id) != nil {
                        continuation.resume(throwing: CancellationError())
                        return
                    }
                    outstanding -= 1
                    jobs.append(Job(at: current + duration, sequence: id, work: .resume(continuation)))
                    condition.broadcast()
                }
            }
        } onCancel: {
            condition.withLock {
                if let index = jobs.firstIndex(where: { $0.sequence == id }), case .resume(let continuation) = jobs[index].work {
                    jobs.remove(at: index)
                    outstanding += 1
                    continuation.resume(throwing: CancellationError())
                } else {
                    cancelledSleeps.insert(id)
                }
            }
        }
    }

    // MARK: Internals

    private static func earlier(_ a: Job, _ b: Job) -> Bool {
        (a.at, a.sequence) < (b.at, b.sequence)
    }

    private func nextSequence() -> UInt64 {
        sequence += 1
        return sequence
    }

    private func enqueue(_ work: Work, after delay: Duration) -> UInt64 {
        condition.withLock {
            let id = nextSequence()
            jobs.append(Job(at: current + max(.zero, delay), sequence: id, work: work))
            condition.broadcast()
            return id
        }
    }

    private func remove(_ id: UInt64) {
        condition.withLock { jobs.removeAll { $0.sequence == id } }
    }

    /// Called with the lock held.
    private func waitUntilSettled() {
        let deadline = Date(timeIntervalSinceNow: settleTimeout)
        while outstanding > 0 {
            if !condition.wait(until: deadline) {
                preconditionFailure(
                    "VirtualScheduler: spawned work did not settle within \(settleTimeout) s of real time; "
                        + "work that needs time to pass must await VirtualScheduler.sleep(for:)")
            }
        }
    }

    private func takeNextJob(upTo target: MonotonicInstant) -> Job? {
        condition.withLock {
            waitUntilSettled()
            guard let index = jobs.indices.filter({ jobs[$0].at <= target }).min(by: { Self.earlier(jobs[$0], jobs[$1]) })
            else {
                current = max(current, target)
                return nil
            }
            let job = jobs.remove(at: index)
            runCount += 1
            current = max(current, job.at)
            if case .resume = job.work { outstanding += 1 }
            return job
        }
    }

    private func run(_ job: Job) {
        switch job.work {
        case .state(let work): stateLock.withLock { work() }
        case .delivery(let work): work()
        case .resume(let continuation): continuation.resume()
        }
    }
}

/// Runs tasks on a serial dispatch queue of their own. A serial queue without a target
/// overcommits: it gets a thread even when every other thread is blocked.
final class SerialQueueTaskExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
