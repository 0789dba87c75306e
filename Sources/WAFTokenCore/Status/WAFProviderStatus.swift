#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A consistent snapshot of the provider, taken on its state queue.
public struct WAFProviderStatus: Sendable {
    public struct Lifecycle: Sendable, Hashable {
        public var state: WAFLifecycleState
        public var profile: WAFLifecycleProfile
        public var active: Bool
        /// Background refresh is paused: inactive for longer than `tokenRefreshDelaySec` (LIFE-3).
        public var paused: Bool
    }

    public enum RefreshState: String, Sendable, Hashable {
        /// The next periodic refresh is scheduled (or a regular fetch is under way).
        case scheduled
        /// The last attempt failed; the next one is scheduled by the retry rules.
        case retrying
        /// Inactive for longer than `tokenRefreshDelaySec`: no refresh until active again.
        case paused
        /// Background refresh is disabled: tokens are fetched on demand only.
        case disabled
        /// Nothing scheduled (the provider was shut down).
        case idle
    }

    public struct Refresh: Sendable {
        public var state: RefreshState
        /// When the next attempt is due; in the past while it is held for an inactive app.
        public var nextAt: Date?
        /// The next attempt is due but held until the app is active again (LIFE-2).
        public var held: Bool
        public var inFlight: Bool
        public var consecutiveFailures: Int
        public var lastError: SdkError?
        /// `onTokenReady`, refresh and on-demand requests waiting for a token.
        public var pendingRequests: Int
    }

    public struct Token: Sendable {
        public var fingerprint: String
        public var fetchedAt: Date
        public var age: Duration
        public var stale: Bool
    }

    public struct Counters: Sendable, Hashable {
        public var fetchAttempts = 0
        public var fetchSuccesses = 0
        public var fetchFailures = 0
        public var callbackFailures = 0
    }

    public var lifecycle: Lifecycle
    public var refresh: Refresh
    public var token: Token?
    public var counters: Counters
    public var backgroundRefreshEnabled: Bool
}
