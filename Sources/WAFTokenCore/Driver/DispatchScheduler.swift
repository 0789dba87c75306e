import Dispatch

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The production scheduler: a serial queue owns the provider's state, timers fire on it,
/// callbacks run in line on lanes that a slow one cannot hold up for long (`CallbackRunner`),
/// fetches run as detached tasks.
///
/// Time is `CLOCK_BOOTTIME`, and so are the timers (`BoottimeTimers`): both count the time the
/// machine spends suspended, so a token's age is its age and a refresh due during a sleep runs as
/// soon as the machine wakes (TOK-9).
public final class DispatchScheduler: WAFScheduler {
    /// The serial queue that owns the provider's state.
    public let stateQueue: DispatchQueue
    private let callbacks: CallbackRunner
    private let stateQueueKey = DispatchSpecificKey<Void>()
    #if os(Linux)
    private let timers: BoottimeTimers
    private let origin = BoottimeTimers.now()
    #else
    private let origin = ContinuousClock.now
    #endif

    public init(label: String = "waf-token-provider") {
        stateQueue = DispatchQueue(label: "\(label).state")
        callbacks = CallbackRunner(label: "\(label).callback")
        #if os(Linux)
        timers = BoottimeTimers(queue: stateQueue)
        #endif
        stateQueue.setSpecific(key: stateQueueKey, value: ())
    }

    public var now: MonotonicInstant {
        #if os(Linux)
        MonotonicInstant(sinceOrigin: .nanoseconds(BoottimeTimers.now() - origin))
        #else
        MonotonicInstant(sinceOrigin: ContinuousClock.now - origin)
        #endif
    }

    public var wallClockNow: Date { Date() }

    public func execute(_ work: @escaping @Sendable () -> Void) {
        stateQueue.async(execute: work)
    }

    public func executeAndWait<T: Sendable>(_ work: @Sendable () -> T) -> T {
        precondition(
            DispatchQueue.getSpecific(key: stateQueueKey) == nil,
            "executeAndWait called on the provider's own state queue (it would deadlock)")
        return stateQueue.sync(execute: work)
    }

    public func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> WAFCancellable {
        #if os(Linux)
        // No leeway: a refresh deadline is a maximum (RET-7), it must not drift later.
        let id = timers.schedule(at: BoottimeTimers.now() + max(0, delay.nanoseconds), work)
        return WAFCancellable { [timers] in timers.cancel(id) }
        #else
        // A dispatch source is thread-safe (cancel from anywhere), but not marked Sendable.
        nonisolated(unsafe) let timer = DispatchSource.makeTimerSource(queue: stateQueue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(max(0, delay.nanoseconds))), leeway: .nanoseconds(0))
        timer.setEventHandler {
            timer.cancel()
            work()
        }
        timer.resume()
        return WAFCancellable { timer.cancel() }
        #endif
    }

    public func deliver(_ work: @escaping @Sendable () -> Void) {
        // Serial queues, not a concurrent one: a concurrent queue runs on libdispatch's shared
        // pool, whose monitor then wakes the process every second for ever (docs/performance.md, "At rest").
        callbacks.run(work)
    }

    public func spawn(_ work: @escaping @Sendable () async -> Void) -> WAFCancellable {
        let task = Task.detached { await work() }
        return WAFCancellable { task.cancel() }
    }
}
