import NIOConcurrencyHelpers
@_spi(ExperimentalCustomExecutors) import _Concurrency

#if canImport(Glibc)
import Glibc
#endif

/// The main actor's executor: the main thread waits on a condition for jobs and runs them in
/// order, and nothing else.
///
/// Why not the platform's (libdispatch's `dispatch_main`): it ends the main thread with
/// `pthread_exit`, whose unwinding has glibc load `libgcc_s.so.1` at that moment. That happened
/// just after the main task was enqueued, on the CPU the scheduler had woken the main task's event
/// loop on, and the loop waited for it: 0.3 ms of every start (`perf record -e
/// sched:sched_switch`), while the other CPU idled. Nothing in the daemon or its packages uses the
/// main actor today; this keeps it working for whatever does, at no cost at rest (a thread blocked
/// on a futex is never woken).
final class MainThreadExecutor: MainExecutor, @unchecked Sendable {
    /// 1 while jobs wait (the condition `run` waits for), 0 when there are none.
    private let pending = ConditionLock(value: 0)
    /// Guarded by `pending`.
    private var jobs: [UnownedJob] = []
    private var stopped = false
    /// Made by `EventLoopExecutors.main`, on the main thread, which `run` is called on too.
    private let mainThread = pthread_self()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pending.lock()
        jobs.append(job)
        pending.unlock(withValue: 1)
    }

    /// Runs the jobs as they come, on the calling thread (the main thread), until `stop`.
    func run() throws {
        while true {
            pending.lock(whenValue: 1)
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            let stop = stopped
            pending.unlock(withValue: 0)
            if stop { return }
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }

    func stop() {
        pending.lock()
        stopped = true
        pending.unlock(withValue: 1)
    }

    var isMainExecutor: Bool { true }

    func checkIsolated() {
        precondition(pthread_equal(pthread_self(), mainThread) != 0, "the main actor's job runs off the main thread")
    }
}
