import Dispatch
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFTokenCore

/// The runner on real threads. Its bounds are about threads, not time: every wait has a deadline
/// far above what the behaviour needs.
@Suite("Callbacks: in line, never held up for long by a slow one (TOK-6)", .offPool, .timeLimit(.minutes(1)))
struct CallbackRunnerTests {
    @Test("TOK-6: a burst of quick callbacks runs in the order given, on one lane, not a thread each")
    func TOK6_burstOnOneLane() async {
        let runner = CallbackRunner(label: "test")
        let order = NIOLockedValueBox<[Int]>([])
        let done = await onOwnThread {
            let finished = DispatchSemaphore(value: 0)
            for number in 0..<2000 {
                runner.run {
                    order.withLockedValue { $0.append(number) }
                    if number == 1999 { finished.signal() }
                }
            }
            return finished.wait(timeout: .now() + 20) == .success
        }
        #expect(done)
        #expect(order.withLockedValue { $0 } == Array(0..<2000))
        // One lane, and a few more if the machine paused the lane's thread past the patience while
        // callbacks waited (a queue per callback used 255 threads for this).
        #expect(runner.lanesOpened < 20, "\(runner.lanesOpened) lanes")
    }

    @Test("TOK-6: callbacks behind a slow one run while it still blocks")
    func TOK6_slowCallbackHoldsUpNoOther() async {
        let runner = CallbackRunner(label: "test")
        let (slowStarted, othersRan) = await onOwnThread {
            let release = DispatchSemaphore(value: 0)
            let entered = DispatchSemaphore(value: 0)
            runner.run {
                entered.signal()
                _ = release.wait(timeout: .now() + 30)
            }
            let slowStarted = entered.wait(timeout: .now() + 10) == .success
            let ran = DispatchSemaphore(value: 0)
            for _ in 0..<10 { runner.run { ran.signal() } }
            let othersRan = (0..<10).allSatisfy { _ in ran.wait(timeout: .now() + 10) == .success }
            release.signal()
            return (slowStarted, othersRan)
        }
        #expect(slowStarted)
        #expect(othersRan)
        // The slow one's lane and one more (a few more only if the machine paused that one too).
        #expect((2..<10).contains(runner.lanesOpened), "\(runner.lanesOpened) lanes")
    }

    @Test("TOK-6: callbacks that all block, each until every one has started, all start")
    func TOK6_everySlowCallbackGetsALane() async {
        let runner = CallbackRunner(label: "test")
        let count = 20
        let allStarted = await onOwnThread {
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            for _ in 0..<count {
                runner.run {
                    started.signal()
                    _ = release.wait(timeout: .now() + 30)
                }
            }
            let all = (0..<count).allSatisfy { _ in started.wait(timeout: .now() + 10) == .success }
            for _ in 0..<count { release.signal() }
            return all
        }
        #expect(allStarted)
        #expect(runner.lanesOpened == count)
    }

    @Test("TOK-6: a lane that went idle is used again, not a new one")
    func TOK6_idleLaneReused() async {
        let runner = CallbackRunner(label: "test")
        let ran = await onOwnThread {
            let ran = DispatchSemaphore(value: 0)
            return (0..<50).allSatisfy { _ in
                runner.run { ran.signal() }
                return ran.wait(timeout: .now() + 10) == .success
            }
        }
        #expect(ran)
        #expect(runner.lanesOpened < 10, "\(runner.lanesOpened) lanes for 50 callbacks one after another")
    }
}
