import NIOConcurrencyHelpers
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// Forced refreshes of one provider (`POST /v1/refresh`, a challenge the proxy met), kept to
/// `refresh.minForcedIntervalSec` (TENANT-4): one starts a fetch, with its proof of work, at most
/// once per interval; those that come while it runs join it; those that come after it, inside
/// the interval, start nothing (the caller answers with the token fetched last). A loop of
/// refresh requests is then one fetch per interval, not one per request.
package final class ForcedRefresh: Sendable {
    package enum Decision: Sendable {
        /// A fetch started for this request.
        case fetched
        /// It joined the forced fetch in flight; its callback gets that fetch's result.
        case joined
        /// Inside the interval with no fetch in flight: nothing started, the callback is not called.
        case limited
    }

    private struct State {
        var interval: Duration
        var lastFetch: timespec?
        /// The callbacks of the forced fetch in flight; nil when none runs.
        var waiting: [WAFTokenResultCallback]?
    }

    private let state: NIOLockedValueBox<State>
    /// Told of every decision (the daemon's metrics).
    private let observer: @Sendable (Decision) -> Void

    package init(interval: Duration = .zero, observer: @escaping @Sendable (Decision) -> Void = { _ in }) {
        state = NIOLockedValueBox(State(interval: interval))
        self.observer = observer
    }

    package var interval: Duration {
        get { state.withLockedValue { $0.interval } }
        set { state.withLockedValue { $0.interval = newValue } }
    }

    /// Refreshes `provider`'s token, or joins the refresh in flight, or, inside the interval,
    /// does nothing and says so; `callback` is called for `fetched` and `joined`.
    @discardableResult
    package func request(_ provider: WAFTokenProvider, _ callback: @escaping WAFTokenResultCallback) -> Decision {
        let now = Self.now()
        let decision: Decision = state.withLockedValue { state in
            if state.waiting != nil {
                state.waiting!.append(callback)
                return .joined
            }
            if let last = state.lastFetch, state.interval > .zero, Self.elapsed(from: last, to: now) < state.interval { return .limited }
            state.lastFetch = now
            state.waiting = [callback]
            return .fetched
        }
        observer(decision)
        if decision == .fetched {
            provider.refreshToken { [state] token, error in
                let waiting = state.withLockedValue { state in
                    defer { state.waiting = nil }
                    return state.waiting ?? []
                }
                for callback in waiting { callback(token, error) }
            }
        }
        return decision
    }

    /// The boot-time clock: a suspended machine's sleep counts, as for the provider's own timers.
    private static func now() -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return now
    }

    private static func elapsed(from start: timespec, to end: timespec) -> Duration {
        .seconds(end.tv_sec - start.tv_sec) + .nanoseconds(end.tv_nsec - start.tv_nsec)
    }
}
