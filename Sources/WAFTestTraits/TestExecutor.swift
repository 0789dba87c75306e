import Foundation

/// Runs a test's jobs, and those of the tasks it starts, on `TestThreads`: every job gets a thread
/// at once, an idle one or a new one. So a test that blocks or computes holds threads of its own,
/// never the concurrency pool's, and the tasks it starts (which inherit this executor) still run
/// side by side as they would on the pool.
///
/// Not dispatch queues: libdispatch on Linux gives its overcommitting queues at most 255 threads
/// per priority, which test jobs and the providers' own queues then share. A full run once had
/// 334 such threads: past the cap, a provider's state queue or callback waited for some test to
/// end, under load longer than the 10 s a real-thread test allows (four core tests failed so).
///
/// One for the whole run, never freed: a task holds its executor preference unowned, and the
/// runtime still touches the executor after `withTaskExecutorPreference` returns (the job that
/// returned is still running on it, and a `Task {}` begun inside the scope keeps the preference).
/// An executor made per test was freed under them, and a run of the suite now and then died of
/// heap corruption ("malloc_consolidate(): unaligned fastbin chunk detected") that ASan, whose
/// quarantine never reuses freed memory and which does not instrument the runtime, never saw.
final class TestExecutor: TaskExecutor {
    static let shared = TestExecutor()

    private init() {}

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        TestThreads.shared.run { job.runSynchronously(on: executor) }
    }

    /// Whether the caller runs on a test's thread.
    static var isCurrent: Bool { TestThreads.isCurrent }
}

/// An unbounded set of threads: a job runs on an idle thread, else on a new one; a thread idle
/// for ten seconds ends. Threads, not a pool with a cap, since test jobs block.
final class TestThreads: @unchecked Sendable {
    static let shared = TestThreads()

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    private var idle = 0

    private static let idleLifetime: TimeInterval = 10
    private static let marker = "waf-test-thread"

    func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        // Each waiting thread takes one job when it wakes: start a thread for each job beyond them.
        let start = jobs.count - next > idle
        if !start { condition.signal() }
        condition.unlock()
        if start {
            startThread { [self] in work() }
        }
    }

    static var isCurrent: Bool { Thread.current.threadDictionary[marker] != nil }

    private func work() {
        Thread.current.threadDictionary[Self.marker] = true
        while let job = take() { job() }
    }

    /// The next job, or nil when none came for `idleLifetime`.
    private func take() -> (@Sendable () -> Void)? {
        condition.lock()
        defer { condition.unlock() }
        while next == jobs.count {
            idle += 1
            let woken = condition.wait(until: Date(timeIntervalSinceNow: Self.idleLifetime))
            idle -= 1
            if !woken && next == jobs.count { return nil }
        }
        let job = jobs[next]
        next += 1
        if next == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            next = 0
        }
        return job
    }
}
