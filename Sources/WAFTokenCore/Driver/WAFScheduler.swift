#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Time and execution for a token provider.
///
/// The provider owns its state on one serial *state context* and never touches it elsewhere. It
/// reads time, sets timers, runs its fetches and hands results to callers only through this
/// protocol, so a test scheduler can run every timing rule in virtual time.
/// `DispatchScheduler` is the production implementation; `WAFTokenCoreTestKit.VirtualScheduler`
/// the test one.
public protocol WAFScheduler: AnyObject, Sendable {
    /// Now, on the monotonic clock that decides ages and deadlines.
    var now: MonotonicInstant { get }

    /// Now, by the wall clock, for timestamps people read (and cookies, and persisted state).
    var wallClockNow: Date { get }

    /// Runs `work` on the state context, after the work already submitted.
    func execute(_ work: @escaping @Sendable () -> Void)

    /// Runs `work` on the state context and waits for it. Never call it from the state context.
    func executeAndWait<T: Sendable>(_ work: @Sendable () -> T) -> T

    /// Runs `work` on the state context once `delay` has passed, unless cancelled first.
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> WAFCancellable

    /// Runs `work` off the state context, on a background thread: user callbacks go here, so that a
    /// slow callback never stalls the provider.
    func deliver(_ work: @escaping @Sendable () -> Void)

    /// Starts asynchronous work (a token fetch) off the state context. Cancelling the handle
    /// cancels the task; the work reports back through `execute`.
    func spawn(_ work: @escaping @Sendable () async -> Void) -> WAFCancellable
}

/// A handle that cancels a timer or a spawned task. Cancelling twice is harmless.
public struct WAFCancellable: Sendable {
    private let action: @Sendable () -> Void

    public init(_ action: @escaping @Sendable () -> Void) {
        self.action = action
    }

    public func cancel() { action() }

    public static let none = WAFCancellable {}
}
