import Dispatch
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFEventLoopExecutor

#if canImport(Glibc)
import Glibc
#endif

/// An actor whose jobs run on the executor under test, as the main actor's do on the main thread.
private actor OnExecutor {
    let executor: MainThreadExecutor
    private(set) var seen: [Int] = []

    init(_ executor: MainThreadExecutor) { self.executor = executor }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Records `value` and says whether it ran on `thread`.
    func record(_ value: Int, on thread: pthread_t) -> Bool {
        executor.checkIsolated()
        seen.append(value)
        return pthread_equal(pthread_self(), thread) != 0
    }
}

@Suite("The main actor's executor", .offPool, .timeLimit(.minutes(1)))
struct MainThreadExecutorTests {
    @Test("Jobs run in order on the thread that runs it, and stop ends the run")
    func runsJobsInOrderUntilStopped() async throws {
        // Made and run on a thread of its own, as EventLoopExecutors.main does on the main thread.
        let made = ConditionLock(value: 0)
        let state = NIOLockedValueBox<(MainThreadExecutor, pthread_t)?>(nil)
        let ended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let executor = MainThreadExecutor()
            state.withLockedValue { $0 = (executor, pthread_self()) }
            made.lock()
            made.unlock(withValue: 1)
            try? executor.run()
            ended.signal()
        }
        made.lock(whenValue: 1)
        made.unlock()
        let (executor, thread) = try #require(state.withLockedValue { $0 })
        let actor = OnExecutor(executor)
        for value in 0..<50 {
            #expect(await actor.record(value, on: thread), "job \(value) ran off the executor's thread")
        }
        #expect(await actor.seen == Array(0..<50))
        executor.stop()
        #expect(ended.wait(timeout: .now() + 10) == .success, "run() did not return within 10 s of stop()")
    }
}
