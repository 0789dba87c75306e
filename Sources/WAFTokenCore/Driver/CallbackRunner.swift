import Dispatch
import NIOConcurrencyHelpers

/// Runs the provider's callbacks off its state queue (TOK-6): in the order given, on as few
/// threads as keep them moving.
///
/// A queue per callback holds a slow callback up from nothing, but libdispatch starts a thread for
/// each such queue that has work: a burst of quick answers (one refresh answering a thousand
/// `?wait=` requests) ran on 255 threads. Here callbacks wait in one line, drained by lanes
/// (serial queues); a second lane starts only when no callback has started for `patience` while
/// some wait, that is when every lane is held by a slow one. So a burst takes one thread, and a
/// slow callback holds the others up by `patience` at most.
final class CallbackRunner: Sendable {
    /// How long waiting callbacks may see no callback start before another lane is opened.
    static let patience = Duration.milliseconds(20)
    /// Idle lanes kept for the next slow callback; more are let go.
    static let idleLanesKept = 4

    private struct State {
        var waiting: [@Sendable () -> Void] = []
        var nextWaiting = 0
        var idleLanes: [DispatchQueue] = []
        var busyLanes = 0
        var started: UInt64 = 0
        /// The callbacks started when the watchdog was armed; nil when it is not armed.
        var watchedFrom: UInt64?
        var lanesOpened = 0
    }

    // Not `Synchronization.Mutex`: on Linux its contended lock is handed over by the kernel (a PI
    // futex), which the thread sanitizer cannot see; `make test-tsan` reported every burst as a race.
    private let state = NIOLockedValueBox(State())
    private let label: String
    private let watchdog: DispatchQueue

    init(label: String) {
        self.label = label
        watchdog = DispatchQueue(label: "\(label).watchdog")
    }

    func run(_ callback: @escaping @Sendable () -> Void) {
        let lane = state.withLockedValue { state -> DispatchQueue? in
            state.waiting.append(callback)
            if state.busyLanes == 0 { return takeLane(&state) }
            armWatchdog(&state)
            return nil
        }
        lane.map(drain)
    }

    /// Lanes opened so far: one for any number of quick callbacks, one more per slow one.
    var lanesOpened: Int { state.withLockedValue { $0.lanesOpened } }

    private func drain(_ lane: DispatchQueue) {
        lane.async { [self] in
            while let callback = next(releasing: lane) { callback() }
        }
    }

    /// The next waiting callback for `lane`, or nil when none waits and the lane went idle.
    private func next(releasing lane: DispatchQueue) -> (@Sendable () -> Void)? {
        state.withLockedValue { state in
            guard state.nextWaiting < state.waiting.count else {
                state.busyLanes -= 1
                if state.idleLanes.count < Self.idleLanesKept { state.idleLanes.append(lane) }
                return nil
            }
            let callback = state.waiting[state.nextWaiting]
            state.nextWaiting += 1
            state.started &+= 1
            if state.nextWaiting == state.waiting.count {
                state.waiting.removeAll(keepingCapacity: state.waiting.count <= 64)
                state.nextWaiting = 0
            }
            return callback
        }
    }

    private func takeLane(_ state: inout State) -> DispatchQueue {
        state.busyLanes += 1
        if let lane = state.idleLanes.popLast() { return lane }
        state.lanesOpened += 1
        return DispatchQueue(label: "\(label).\(state.lanesOpened)")
    }

    /// Armed only while callbacks wait behind busy lanes: at rest nothing wakes the process.
    private func armWatchdog(_ state: inout State) {
        guard state.watchedFrom == nil else { return }
        state.watchedFrom = state.started
        let (seconds, attoseconds) = Self.patience.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        watchdog.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in watch() }
    }

    private func watch() {
        let lane = state.withLockedValue { state -> DispatchQueue? in
            let from = state.watchedFrom
            state.watchedFrom = nil
            guard state.nextWaiting < state.waiting.count else { return nil }
            armWatchdog(&state)
            // Callbacks started meanwhile: the lanes are moving, the line is merely long.
            return from == state.started ? takeLane(&state) : nil
        }
        lane.map(drain)
    }
}
