import Dispatch
import Foundation
import Testing

@testable import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

@Suite("Where tests run: off the pool, watched for stalls", .offPool)
struct PoolWatcherTests {
    @Test("a sleep that woke later than the limit is a stall; one within it is not")
    func stallsOverTheLimit() {
        let watcher = PoolWatcher(limit: .seconds(2), control: false)
        let start = ContinuousClock.now
        watcher.record(due: start, woke: start + .milliseconds(1900))
        watcher.record(due: start + .seconds(10), woke: start + .milliseconds(12_100))
        let stalls = watcher.stalls(during: start...(start + .seconds(60)))
        #expect(stalls.map(\.length) == [.milliseconds(2100)])
    }

    @Test("a late wake-up is a stall only by as much as it was later than a plain thread's meanwhile")
    func stallsBeyondTheControl() {
        let watcher = PoolWatcher(limit: .seconds(2), control: false)
        let start = ContinuousClock.now
        // The whole process ran late (the plain thread too): the machine, not the pool.
        watcher.recordControl(due: start + .milliseconds(100), woke: start + .milliseconds(2300))
        watcher.record(due: start, woke: start + .milliseconds(2400))
        // The pool alone ran late: the plain thread woke on time.
        watcher.recordControl(due: start + .seconds(11), woke: start + .milliseconds(11_050))
        watcher.record(due: start + .seconds(10), woke: start + .milliseconds(12_400))
        let stalls = watcher.stalls(during: start...(start + .seconds(60)))
        #expect(stalls.map(\.length) == [.milliseconds(2400)])
        #expect(stalls.first?.interval.lowerBound == start + .seconds(10))
    }

    @Test("a stall concerns the tests that ran during it, and only those")
    func stallsOverlapTests() {
        let start = ContinuousClock.now
        let stall = PoolWatcher.Stall(interval: (start + .seconds(5))...(start + .seconds(8)))
        #expect(PoolWatcher.overlapping([stall], start...(start + .seconds(5))) == [stall], "ended as it began")
        #expect(PoolWatcher.overlapping([stall], (start + .seconds(7))...(start + .seconds(20))) == [stall], "began during it")
        #expect(PoolWatcher.overlapping([stall], start...(start + .seconds(4))).isEmpty, "ended before it")
        #expect(PoolWatcher.overlapping([stall], (start + .seconds(9))...(start + .seconds(20))).isEmpty, "began after it")
    }

    @Test("a synchronous test body runs on a thread of its own, not on the concurrency pool")
    func bodyRunsOffThePool() {
        #expect(OffPool.inScope)
        #expect(TestExecutor.isCurrent, "on a test thread, not a pool thread")
    }

    @Test("test jobs that block all get a thread, past libdispatch's cap of 255 per priority")
    func blockedJobsAllRun() async {
        // With a dispatch queue per job, the 256th waited until one of the first 255 ended.
        let count = 300
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            TestThreads.shared.run {
                started.signal()
                release.wait()
            }
        }
        let all = await onOwnThread {
            (0..<count).allSatisfy { _ in started.wait(timeout: .now() + 10) == .success }
        }
        for _ in 0..<count { release.signal() }
        #expect(all, "every blocked job was running at once")
    }

    @Test("a test's bound is its time limit, or its suite's, else five minutes", .timeLimit(.minutes(3)))
    func boundFromTimeLimit() {
        #expect(OffPool.bound(of: Test.current!) == .seconds(180))
    }

    /// Blocks every thread of the pool for 2 s (twice over) on purpose: with the watcher in place this test fails,
    /// naming itself. Run only on demand, and alone (`scripts/check-watchers.sh`, in `make test`),
    /// since it would fail every test running beside it.
    @Test("the watcher fails a test that blocks the pool", .enabled(if: getenv("WAF_POOL_WATCH_SELFTEST") != nil))
    func blockingThePoolFails() async {
        let threads = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(threads, 1) * 2 {
                group.addTask {
                    let blocker = Task<Void, Never>.detached { _ = sleep(2) }
                    await blocker.value
                }
            }
        }
    }
}
