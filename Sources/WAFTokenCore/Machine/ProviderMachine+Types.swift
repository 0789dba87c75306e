#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ProviderMachine {
    /// What the provider runs with; changed only by `reconfigure`.
    public struct Settings: Sendable, Hashable {
        public var configuration: WAFConfiguration
        /// Which lifecycle states are active (LIFE-1).
        public var profile: WAFLifecycleProfile
        /// Random shortening of the periodic and error-phase waits (RET-7).
        public var jitter: Bool
        /// Mark the token cookie `Secure` (COOK-3).
        public var cookieSecure: Bool

        public init(configuration: WAFConfiguration, profile: WAFLifecycleProfile = .ios, jitter: Bool = true, cookieSecure: Bool = false) {
            self.configuration = configuration
            self.profile = profile
            self.jitter = jitter
            self.cookieSecure = cookieSecure
        }
    }

    /// The instant an event is handled at, and a number in 0…1 for a wait it may jitter.
    public struct Clock: Sendable, Hashable {
        public var monotonic: MonotonicInstant
        public var wall: Date
        public var randomUnit: Double

        public init(monotonic: MonotonicInstant, wall: Date, randomUnit: Double) {
            self.monotonic = monotonic
            self.wall = wall
            self.randomUnit = randomUnit
        }
    }

    /// A fetch or a timer, as the machine named it.
    public struct ID: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt64
        public var description: String { "#\(rawValue)" }
    }

    /// A caller waiting for an answer, as the driver named it.
    public struct WaiterID: Sendable, Hashable {
        public let rawValue: UInt64
        public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    }

    public enum Request: Sendable, Hashable {
        /// `onTokenReady` (force false) or a forced refresh (RET-8): a token or `allRetriesFailed`.
        case ready(force: Bool)
        /// `getToken()` without background refresh: a new token, or the previous one (RET-4).
        case onDemand
    }

    public enum Answer: Sendable {
        case token(WAFToken)
        case failure(SdkError)
        /// An on-demand caller's answer: the new token, or the previous one after the retries.
        case onDemand(WAFToken?)
    }

    public enum Event: Sendable {
        /// The provider starts, with a token saved by an earlier run, if any (TOK-1).
        case start(restored: WAFTokenProviderOptions.RestoredToken?)
        case fetchEnded(ID, Result<String, SdkError>)
        case timerFired(ID)
        case lifecycle(WAFLifecycleState)
        case request(WaiterID, Request)
        /// The caller of that request no longer waits (its own deadline passed): it is forgotten,
        /// and no answer goes to it. What it set going (an attempt) runs on as for anyone.
        case withdraw(WaiterID)
        /// `loadTokenIntoProvider` (OBJ-3); a nil date means "fetched now".
        case load(String, fetchedAt: Date?)
        case reconfigure(Settings)
        /// User code in a result callback threw (TOK-6).
        case callbackFailed(String)
        case stop
    }

    public enum Action: Sendable {
        case startFetch(ID, WAFTokenFetchRequest)
        case cancelFetch(ID)
        case armTimer(ID, at: MonotonicInstant)
        case cancelTimer(ID)
        case answer(WaiterID, Answer)
        case announce(WAFProviderEvent)
        /// The token of an identity changed: store it, or with no token remove what is stored.
        case persist(WAFTokenRecord)
        /// What readers off the state context see changed. Always first, before any answer or
        /// announcement of the same event (TOK-1).
        case publish(ProviderSnapshot)
    }

    struct CachedToken: Sendable, Hashable {
        var token: WAFToken
        var origin: WAFTokenOrigin
        /// Loaded older than `tokenRefreshDelaySec`, or with a fetch time not to be trusted (TOK-8).
        var loadedStale: Bool
        /// The fetch time is not to be trusted (TOK-8): the token counts as older than any other.
        var untrustedTime: Bool
    }

    struct Fetch: Sendable, Hashable {
        let id: ID
        let identity: WAFTokenIdentity
        /// Cancelled (the app went inactive with nobody waiting, or the identity changed): it
        /// still counts as in flight until it reports back, so that two never overlap (TOK-4).
        var cancelled = false
    }

    struct Armed: Sendable, Hashable {
        let id: ID
        let at: MonotonicInstant
    }

    struct Waiter: Sendable {
        let id: WaiterID
        let request: Request
        var failedAttempts = 0
    }
}
