import NIOConcurrencyHelpers
@_spi(ExperimentalCustomExecutors) import _Concurrency

#if canImport(Glibc)
import Glibc
#endif

/// The main actor's executor: the main thread waits on a condition for jobs and runs them in
/// order, and nothing else.
///
/// Why not the platform's (libdispatch's `dispatch_main`): it parks the main thread by ending it
/// with `pthread_exit`, whose unwinding has glibc load `libgcc_s.so.1` at that moment. That
/// happened just after the main task was enqueued, on the CPU the scheduler had woken the main
/// task's event loop on, and the loop waited for it: 0.3 ms of every start (`perf record -e
/// sched:sched_switch`), while the other CPU idled. Nothing in the daemon or its packages uses the
/// main actor or `DispatchQueue.main` today (which nothing drains now); this keeps the main actor
/// working for whatever does, at no cost at rest (a thread blocked on a futex is never woken).
final class MainThreadExecutor: MainExecutor, @unchecked Sendable {
    /// 1 while jobs wait or a stop is asked (what `run` waits for), 0 otherwise.
    private let pending = ConditionLock(value: 0)
    /// Guarded by `pending`.
    private var jobs: [UnownedJob] = []
    /// Guarded by `pending`.
    private var stopping = false
    /// The thread the main actor's jobs run on: the one that made it (`EventLoopExecutors.main`
    /// makes it on the main thread, which then calls `run`).
    private let owner = pthread_self()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pending.lock()
        jobs.append(job)
        pending.unlock(withValue: 1)
    }

    /// Runs the jobs as they come, in the order they came, on the calling thread, until `stop`:
    /// the jobs taken with the stop (those enqueued before it, and any just after) still run, and
    /// a later `run` serves the rest.
    func run() throws {
        var batch: [UnownedJob] = []
        while true {
            pending.lock(whenValue: 1)
            swap(&batch, &jobs)
            let stop = stopping
            stopping = false
            pending.unlock(withValue: 0)
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
            batch.removeAll(keepingCapacity: true)
            if stop { return }
        }
    }

    func stop() {
        pending.lock()
        stopping = true
        pending.unlock(withValue: 1)
    }

    /// Jobs enqueued and not yet taken by `run`: for tests.
    var queued: Int {
        pending.lock()
        defer { pending.unlock() }
        return jobs.count
    }

    func isIsolatingCurrentContext() -> Bool? { pthread_equal(pthread_self(), owner) != 0 }

    func checkIsolated() {
        precondition(pthread_equal(pthread_self(), owner) != 0, "the main actor's job runs off the main thread")
    }
}
