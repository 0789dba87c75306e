import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Runs one provider's delivery actions (`sinks.onToken`), each by its `HookMachine`, in the
/// order of the list, one at a time, on a queue of the runner's own: nothing here runs on the
/// provider's state context or a listener's loop, so a slow or hanging action (a command is killed
/// after `sinks.onTokenTimeoutSec`) delays the actions after it, and never a token read or a refresh.
public final class HookRunner: Sendable {
    /// One run's end, for the event, the log line and the metric (never the token).
    public struct Outcome: Sendable, Equatable {
        public enum Result: String, Sendable {
            case success, failure, timeout
        }

        public let action: String
        public let result: Result
        public let attempt: Int
        /// Why it failed, in one sentence; nil on success.
        public let reason: String?
    }

    /// How a run is done: the real mechanisms, or a test's.
    public typealias Perform = @Sendable (_ action: DeliveryAction, _ token: String) throws(DeliveryFailure) -> Void

    /// When a retry is due: `DispatchTime` here, virtual time in tests.
    public typealias Schedule = @Sendable (_ delay: Duration, _ queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> @Sendable () -> Void

    private final class Slot: @unchecked Sendable {
        // Sendable by hand: `machine` and `cancelRetry` are touched on `state` only.
        let action: DeliveryAction
        var machine = HookMachine()
        var cancelRetry: (@Sendable () -> Void)?

        init(_ action: DeliveryAction) {
            self.action = action
        }
    }

    private let slots: [Slot]
    private let state = DispatchQueue(label: "waf-tokend.hooks")
    /// Where the actions run, one after the other.
    private let work = DispatchQueue(label: "waf-tokend.hooks.work")
    private let perform: Perform
    private let schedule: Schedule
    private let report: @Sendable (Outcome) -> Void
    /// The command under way, which `stop` kills.
    private let running: RunningCommand?
    /// Once stopped, nothing more runs: not a run already queued, nor a retry, nor a new token.
    private let stopped = NIOLockedValueBox(false)

    public init(
        actions: [DeliveryAction], perform: @escaping Perform, schedule: @escaping Schedule = HookRunner.dispatchSchedule,
        running: RunningCommand? = nil, report: @escaping @Sendable (Outcome) -> Void
    ) {
        self.running = running
        slots = actions.map(Slot.init)
        self.perform = perform
        self.schedule = schedule
        self.report = report
    }

    public var actions: [DeliveryAction] { slots.map(\.action) }

    /// The sinks hold `token`: every action delivers it, or the newest after the run under way.
    public func tokenArrived(_ token: String) {
        state.async { [self] in
            guard !stopped.withLockedValue({ $0 }) else { return }
            for slot in slots { carryOut(slot.machine.tokenArrived(token), slot) }
        }
    }

    /// No more retries; a command under way is ended, its whole group (it would outlive the daemon otherwise).
    /// Returns the newest token some action still owed (a reload hands it to the next runner).
    /// `waitForCommand`: returns once a command under way ended, its whole group (the daemon's stop,
    /// which must leave nothing running); else its group ends on a thread of its own (a reload).
    @discardableResult
    public func stop(waitForCommand: Bool = false) -> String? {
        stopped.withLockedValue { $0 = true }
        let owed = state.sync {
            for slot in slots {
                slot.cancelRetry?()
                slot.cancelRetry = nil
            }
            return slots.compactMap(\.machine.owed).last
        }
        running?.end(wait: waitForCommand)
        return owed
    }

    /// Waits until every run started so far ended (tests).
    public func waitForRuns() {
        for _ in 0..<3 {
            work.sync {}
            state.sync {}
        }
    }

    private func carryOut(_ actions: [HookMachine.Action], _ slot: Slot) {
        for action in actions {
            switch action {
            case .run(let token, let attempt):
                work.async { [self] in
                    guard !stopped.withLockedValue({ $0 }) else { return }
                    let outcome: Outcome
                    do throws(DeliveryFailure) {
                        try perform(slot.action, token)
                        outcome = Outcome(action: slot.action.description, result: .success, attempt: attempt, reason: nil)
                    } catch {
                        outcome = Outcome(
                            action: slot.action.description, result: error.timedOut ? .timeout : .failure, attempt: attempt, reason: error.description
                        )
                    }
                    guard !stopped.withLockedValue({ $0 }) else { return }
                    report(outcome)
                    state.async { [self] in carryOut(slot.machine.runEnded(success: outcome.result == .success), slot) }
                }
            case .armRetry(let delay):
                guard !stopped.withLockedValue({ $0 }) else { return }
                slot.cancelRetry = schedule(delay, state) { [self] in
                    slot.cancelRetry = nil
                    guard !stopped.withLockedValue({ $0 }) else { return }
                    carryOut(slot.machine.retryDue(), slot)
                }
            case .cancelRetry:
                slot.cancelRetry?()
                slot.cancelRetry = nil
            }
        }
    }

    /// A retry after `delay` of real (monotonic) time, on `queue`; the cancel stops it for good.
    public static let dispatchSchedule: Schedule = { delay, queue, work in
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        timer.schedule(deadline: .now() + .nanoseconds(Int(nanoseconds)))
        timer.setEventHandler(handler: work)
        timer.resume()
        let box = TimerBox(timer)
        return { box.cancel() }
    }

    /// DispatchSourceTimer is thread-safe; it is not marked Sendable on Linux.
    private final class TimerBox: @unchecked Sendable {
        let timer: any DispatchSourceTimer
        init(_ timer: any DispatchSourceTimer) { self.timer = timer }
        func cancel() { timer.cancel() }
    }

    /// Reloads a unit (the service manager's plug-in does it, over D-Bus); throws why it did not.
    public typealias ReloadUnit = @Sendable (_ unit: String) throws(DeliveryFailure) -> Void

    /// The real mechanisms: a signal through a pidfd, a unit reload (`reload`, the service
    /// manager's), a command with the token on standard input; `environment` for a command (the
    /// provider's name, a PATH).
    public static func mechanisms(
        allowedUsers: Set<UInt32>, timeout: Duration, environment: [String: String], running: RunningCommand, reload: @escaping ReloadUnit
    ) -> Perform {
        { action, token throws(DeliveryFailure) in
            switch action {
            case .signal(let pidFile, let name):
                try PidfdSignal.send(DeliveryAction.signals[name] ?? 1, pidFile: pidFile, allowedUsers: allowedUsers)
            case .reload(let unit):
                try reload(unit)
            case .run(let argv):
                defer { running.finished() }
                try CommandRun.run(argv, input: token + "\n", environment: environment, timeout: timeout, started: running.started)
            }
        }
    }
}

/// The command a runner is running now, if any: a reload that drops its action, or a daemon that
/// stops, ends its whole process group rather than leave it running on its own (HOOK-7).
public final class RunningCommand: Sendable {
    /// The command under way; `ended`: every command from now on is ended as it starts.
    private let current = NIOLockedValueBox<(child: Spawned?, ended: Bool)>((nil, false))

    public init() {}

    func started(_ child: Spawned) {
        let ended = current.withLockedValue { current in
            current.child = child
            return current.ended
        }
        if ended { child.signalGroup(SIGKILL) }
    }

    func finished() { current.withLockedValue { $0.child = nil } }

    /// Ends the command under way, its whole group (SIGTERM, SIGKILL after `Spawned.hookGrace`),
    /// and any started after; returns at once (the grace runs on a thread of its own). `wait`:
    /// returns once the group ended, within the grace and 5 s (the daemon's stop).
    public func end(wait: Bool = false) {
        let child = current.withLockedValue { current in
            current.ended = true
            return current.child
        }
        guard let child else { return }
        guard wait else {
            DispatchQueue.global().async { child.terminate(grace: Spawned.hookGrace) }
            return
        }
        child.terminate(grace: Spawned.hookGrace)
    }
}
