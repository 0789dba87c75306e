import Dispatch

/// Runs a test's jobs, and those of the tasks it starts, each on a serial dispatch queue made for
/// it. A serial queue without a target overcommits: it gets a thread even when every other thread
/// is busy or blocked. So a test that blocks or computes holds threads of its own, never the
/// concurrency pool's, and the tasks it starts (which inherit this executor) still run side by
/// side as they would on the pool.
final class TestExecutor: TaskExecutor {
    private let label: String
    private static let key = DispatchSpecificKey<Void>()

    init(label: String) {
        self.label = "test: " + label
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let queue = DispatchQueue(label: label)
        queue.setSpecific(key: Self.key, value: ())
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Whether the caller runs on a test's thread.
    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) != nil }
}
