import NIOConcurrencyHelpers
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// Forced refreshes of one provider (`POST /v1/refresh`, a challenge the proxy met), kept to
/// `refresh.minForcedIntervalSec` (TENANT-4): one starts a fetch, with its proof of work, at most
/// once per interval; those that come while it runs join it; those that come after it, inside
/// the interval, start nothing and are answered as that fetch was: with its token, or, when it
/// failed, with its failure for the rest of the interval, never with the old token as if it were
/// new. A loop of refresh requests is then one fetch per interval, not one per request.
package final class ForcedRefresh: Sendable {
    package enum Decision: Sendable {
        /// A fetch started for this request.
        case fetched
        /// It joined the forced fetch in flight; its callback gets that fetch's result.
        case joined
        /// Inside the interval with no fetch in flight: nothing started, the callback is not called.
        /// `failure`: the forced fetch that opened the interval failed so; `retryAfter`: what is
        /// left of the interval.
        case limited(failure: SdkError?, retryAfter: Duration)

        /// As the metric's `result` label writes it.
        package var name: String {
            switch self {
            case .fetched: "fetched"
            case .joined: "joined"
            case .limited: "limited"
            }
        }

        /// Nothing started (the caller answers on its own).
        package var isLimited: Bool {
            if case .limited = self { true } else { false }
        }
    }

    private struct State {
        var interval: Duration
        var lastFetch: timespec?
        /// How the forced fetch that opened the interval ended: nil while it runs, or when it gave
        /// a token.
        var lastFailure: SdkError?
        /// The callbacks of the forced fetch in flight, by the id of their wait; nil when none runs.
        var waiting: [UInt64: WAFTokenResultCallback]?
        var lastWaitID: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>
    /// Told of every decision (the daemon's metrics).
    private let observer: @Sendable (Decision) -> Void

    package init(interval: Duration = .zero, observer: @escaping @Sendable (Decision) -> Void = { _ in }) {
        state = NIOLockedValueBox(State(interval: interval))
        self.observer = observer
    }

    /// Forgets the last forced fetch: a reload switched the identity, and the old one's answer
    /// (a failure, say) is not the new one's.
    package func reset() {
        state.withLockedValue { state in
            state.lastFetch = nil
            state.lastFailure = nil
        }
    }

    package var interval: Duration {
        get { state.withLockedValue { $0.interval } }
        set { state.withLockedValue { $0.interval = newValue } }
    }

    /// Refreshes `provider`'s token, or joins the refresh in flight, or, inside the interval,
    /// does nothing and says so; `callback` is called for `fetched` and `joined`, unless the
    /// caller withdraws it (the wait returned) first: a caller with a deadline forgets it then.
    @discardableResult
    package func request(_ provider: WAFTokenProvider, _ callback: @escaping WAFTokenResultCallback) -> (Decision, WAFTokenWait?) {
        let now = Self.now()
        let (decision, id): (Decision, UInt64) = state.withLockedValue { state in
            state.lastWaitID &+= 1
            let id = state.lastWaitID
            if state.waiting != nil {
                state.waiting![id] = callback
                return (.joined, id)
            }
            if let last = state.lastFetch, state.interval > .zero {
                let elapsed = Self.elapsed(from: last, to: now)
                if elapsed < state.interval { return (.limited(failure: state.lastFailure, retryAfter: state.interval - elapsed), id) }
            }
            state.lastFetch = now
            state.lastFailure = nil
            state.waiting = [id: callback]
            return (.fetched, id)
        }
        observer(decision)
        if case .fetched = decision {
            provider.refreshToken { [state] token, error in
                let waiting = state.withLockedValue { state in
                    defer { state.waiting = nil }
                    state.lastFailure = token == nil ? (error ?? .unexpected(WAFProviderShutDownError())) : nil
                    return state.waiting ?? [:]
                }
                for (_, callback) in waiting.sorted(by: { $0.key < $1.key }) { callback(token, error) }
            }
        }
        if case .limited = decision { return (decision, nil) }
        return (decision, WAFTokenWait { [state] in _ = state.withLockedValue { $0.waiting?.removeValue(forKey: id) } })
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
