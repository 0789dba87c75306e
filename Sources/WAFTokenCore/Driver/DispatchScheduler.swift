import Dispatch

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The production scheduler: a serial queue owns the provider's state, `DispatchSourceTimer`s fire
/// on it, callbacks run on a concurrent background queue, fetches run as detached tasks.
public final class DispatchScheduler: WAFScheduler {
    /// The serial queue that owns the provider's state.
    public let stateQueue: DispatchQueue
    private let callbackQueue: DispatchQueue
    private let origin = ContinuousClock.now
    private let stateQueueKey = DispatchSpecificKey<Void>()

    public init(label: String = "waf-token-provider") {
        stateQueue = DispatchQueue(label: "\(label).state")
        callbackQueue = DispatchQueue(label: "\(label).callbacks", attributes: .concurrent)
        stateQueue.setSpecific(key: stateQueueKey, value: ())
    }

    public var now: MonotonicInstant {
        MonotonicInstant(sinceOrigin: ContinuousClock.now - origin)
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
        // A dispatch source is thread-safe (cancel from anywhere), but not marked Sendable on Linux.
        nonisolated(unsafe) let timer = DispatchSource.makeTimerSource(queue: stateQueue)
        // No leeway: a refresh deadline is a maximum (RET-7), it must not drift later.
        timer.schedule(
            deadline: .now() + .nanoseconds(Int(max(0, delay.nanoseconds))), leeway: .nanoseconds(0))
        timer.setEventHandler {
            timer.cancel()
            work()
        }
        timer.resume()
        return WAFCancellable { timer.cancel() }
    }

    public func deliver(_ work: @escaping @Sendable () -> Void) {
        callbackQueue.async(execute: work)
    }

    public func spawn(_ work: @escaping @Sendable () async -> Void) -> WAFCancellable {
        let task = Task.detached { await work() }
        return WAFCancellable { task.cancel() }
    }
}
