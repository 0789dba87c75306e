import Dispatch
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFDelivery

/// The runner: actions in order, one at a time, retried on a clock the test moves.
@Suite("Delivery: the runner", .offPool, .timeLimit(.minutes(1)))
struct HookRunnerTests {
    /// Retries due when the test says; a cancelled one never fires, as with a dispatch timer.
    final class ManualClock: Sendable {
        private let due = NIOLockedValueBox<[Int: (DispatchQueue, @Sendable () -> Void)]>([:])
        private let next = NIOLockedValueBox(0)
        var schedule: HookRunner.Schedule {
            { [due, next] _, queue, work in
                let id = next.withLockedValue { value in
                    value += 1
                    return value
                }
                due.withLockedValue { $0[id] = (queue, work) }
                return { due.withLockedValue { _ = $0.removeValue(forKey: id) } }
            }
        }
        func fire() {
            let fired = due.withLockedValue { list in
                defer { list = [:] }
                return list.sorted { $0.key < $1.key }.map(\.value)
            }
            for (queue, work) in fired { queue.sync(execute: work) }
        }
    }

    @Test("HOOK1: every action runs for each token, in the list's order, one at a time; outcomes reported, never with the token")
    func HOOK1_inOrder() {
        let runs = NIOLockedValueBox<[String]>([])
        let outcomes = NIOLockedValueBox<[HookRunner.Outcome]>([])
        let runner = HookRunner(
            actions: [.reload(unit: "a.service"), .run(["/bin/b"])],
            perform: { action, token in runs.withLockedValue { $0.append("\(action) \(token)") } },
            report: { outcome in outcomes.withLockedValue { $0.append(outcome) } })
        runner.tokenArrived("t1")
        runner.waitForRuns()
        #expect(runs.withLockedValue { $0 } == ["reload a.service t1", "run /bin/b t1"])
        #expect(outcomes.withLockedValue { $0 }.map(\.result) == [.success, .success])
        #expect(!outcomes.withLockedValue { $0 }.contains { "\($0)".contains("t1") }, "the token is in no outcome")
    }

    @Test("HOOK2: a failing action is retried on its back-off until a newer token; the others are not held up")
    func HOOK2_retries() {
        let clock = ManualClock()
        let failing = NIOLockedValueBox(true)
        let runs = NIOLockedValueBox<[String]>([])
        let runner = HookRunner(
            actions: [.reload(unit: "a.service")],
            perform: { _, token throws(DeliveryFailure) in
                runs.withLockedValue { $0.append(token) }
                if failing.withLockedValue({ $0 }) { throw DeliveryFailure("refused") }
            }, schedule: clock.schedule, report: { _ in })
        runner.tokenArrived("t1")
        runner.waitForRuns()
        clock.fire()
        runner.waitForRuns()
        #expect(runs.withLockedValue { $0 } == ["t1", "t1"], "retried")
        failing.withLockedValue { $0 = false }
        runner.tokenArrived("t2")
        runner.waitForRuns()
        clock.fire()
        runner.waitForRuns()
        #expect(runs.withLockedValue { $0 } == ["t1", "t1", "t2"], "the newer token went instead, and its success ended it")
    }

    @Test("HOOK3: after stop, nothing more runs: not the action queued behind the one under way, not a retry, not a new token")
    func HOOK3_nothingRunsAfterStop() {
        let clock = ManualClock()
        let runs = NIOLockedValueBox<[String]>([])
        let reports = NIOLockedValueBox(0)
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let runner = HookRunner(
            actions: [.reload(unit: "a.service"), .reload(unit: "b.service")],
            perform: { action, token throws(DeliveryFailure) in
                runs.withLockedValue { $0.append("\(action)") }
                if action == .reload(unit: "a.service") {
                    entered.signal()
                    release.wait()
                    throw DeliveryFailure("killed")
                }
            }, schedule: clock.schedule, report: { _ in reports.withLockedValue { $0 += 1 } })
        runner.tokenArrived("t1")
        entered.wait()
        // a.service is under way and b.service queued behind it when the daemon stops.
        let stopped = DispatchQueue(label: "stop")
        stopped.async { runner.stop() }
        stopped.sync {}
        release.signal()
        runner.waitForRuns()
        runner.tokenArrived("t2")
        clock.fire()
        runner.waitForRuns()
        #expect(runs.withLockedValue { $0 } == ["reload a.service"], "b.service never ran")
        #expect(reports.withLockedValue { $0 } == 0, "nothing reported after the stop, and no retry armed")
    }
}
