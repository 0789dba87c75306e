import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFEventLoopExecutor

#if canImport(Glibc)
import Glibc
#endif

/// An actor whose jobs run on the executor under test, as the main actor's do on the main thread:
/// each instance is one job on it at a time.
private actor OnExecutor {
    let executor: MainThreadExecutor
    let log: NIOLockedValueBox<[Int]>
    let value: Int

    init(_ executor: MainThreadExecutor, log: NIOLockedValueBox<[Int]>, value: Int) {
        self.executor = executor
        self.log = log
        self.value = value
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Logs its value; whether it ran where the executor says it is isolated.
    func record() -> Bool {
        log.withLockedValue { $0.append(value) }
        return executor.isIsolatingCurrentContext() == true
    }
}

/// The executor, made and run on a thread of its own (`startThread`), as `EventLoopExecutors.main`
/// does on the main thread; its first run begins at `start`.
private final class Runner: @unchecked Sendable {
    private let made = ConditionLock(value: 0)
    private let go = ConditionLock(value: 0)
    private let ended = ConditionLock(value: 0)
    /// Set on the runner's thread before `made`; read after it.
    private(set) var executor: MainThreadExecutor!

    init() {
        startThread { [self] in
            executor = MainThreadExecutor()
            made.lock()
            made.unlock(withValue: 1)
            // Held until the test has queued what it wants queued before the first run.
            go.lock(whenValue: 1)
            go.unlock()
            try? executor.run()
            ended.lock()
            ended.unlock(withValue: 1)
        }
        made.lock(whenValue: 1)
        made.unlock()
    }

    func start() {
        go.lock()
        go.unlock(withValue: 1)
    }

    func ended(within seconds: Double) -> Bool {
        guard ended.lock(whenValue: 1, timeoutSeconds: seconds) else { return false }
        ended.unlock()
        return true
    }
}

@Suite("The main actor's executor", .offPool, .timeLimit(.minutes(1)))
struct MainThreadExecutorTests {
    /// Jobs queued one after another, each seen queued before the next: the order they ran in is
    /// the order they came in.
    private static func queue(_ count: Int, on runner: Runner, log: NIOLockedValueBox<[Int]>) async throws -> [Task<Bool, Never>] {
        var tasks: [Task<Bool, Never>] = []
        for value in 0..<count {
            let actor = OnExecutor(runner.executor, log: log, value: value)
            tasks.append(Task { await actor.record() })
            let deadline = ContinuousClock.now + .seconds(10)
            while runner.executor.queued < value + 1 {
                try #require(ContinuousClock.now < deadline, "job \(value) was not queued within 10 s")
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        return tasks
    }

    @Test("Jobs queued before the run and during it run in order, on its thread, until stop")
    func runsJobsInOrderUntilStopped() async throws {
        let runner = Runner()
        let log = NIOLockedValueBox<[Int]>([])
        let before = try await Self.queue(20, on: runner, log: log)
        runner.start()
        for task in before { #expect(await task.value, "a job ran where the executor is not isolated") }
        #expect(log.withLockedValue { $0 } == Array(0..<20))
        // While it runs: one at a time.
        for value in 20..<40 {
            let actor = OnExecutor(runner.executor, log: log, value: value)
            #expect(await actor.record())
        }
        #expect(log.withLockedValue { $0 } == Array(0..<40))
        runner.executor.stop()
        #expect(runner.ended(within: 10), "run() did not return within 10 s of stop()")
    }

    @Test("A stop lets the jobs queued before it run first")
    func stopRunsWhatWasQueued() async throws {
        let runner = Runner()
        let log = NIOLockedValueBox<[Int]>([])
        let queued = try await Self.queue(5, on: runner, log: log)
        runner.executor.stop()
        runner.start()
        #expect(runner.ended(within: 10), "run() did not return within 10 s of stop()")
        let ran = log.withLockedValue { $0 }
        #expect(ran == Array(0..<5))
        // Only once they all ran: a job dropped would never end its task.
        guard ran.count == 5 else { return }
        for task in queued { #expect(await task.value) }
    }

    @Test("Off its thread the executor says it is not isolated")
    func notIsolatedElsewhere() {
        let runner = Runner()
        #expect(runner.executor.isIsolatingCurrentContext() == false)
        runner.executor.stop()
        runner.start()
        #expect(runner.ended(within: 10))
    }
}
