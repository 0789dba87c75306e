import Logging

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a provider needs beyond the SDK's `WAFConfiguration`.
public struct WAFTokenProviderOptions: Sendable {
    /// Which lifecycle states are active (LIFE-1).
    public var lifecycleProfile: WAFLifecycleProfile
    /// The state the provider starts in (LIFE-1: foreground); a provider added to a daemon whose
    /// app is in the background starts there, and fetches nothing of its own (LIFE-2).
    public var lifecycle: WAFLifecycleState
    /// Random shortening of the periodic and error-phase waits (RET-7); backoff stays exact.
    public var jitter: Bool
    /// A number in 0…1 for each event; injectable so that tests pin the extremes.
    public var randomUnit: @Sendable () -> Double
    /// Mark the token cookie `Secure` (COOK-3).
    public var cookieSecure: Bool
    /// A token from an earlier run, loaded before the first fetch: fresh, it is served at once
    /// and refreshed on schedule; stale or of untrusted age (TOK-8), it is refreshed at once.
    public var restoredToken: RestoredToken?
    /// Called, in order, on the provider's state context whenever the token to be stored for an
    /// identity changes (the daemon's state file and sinks). Must not block.
    public var persist: (@Sendable (WAFTokenRecord) -> Void)?
    /// Called on the state context right after what `cachedToken()` and `configuration` read has
    /// changed: a cache of answers built from them is out of date. Must not block.
    public var snapshotChanged: (@Sendable () -> Void)?
    public var logger: Logger

    public struct RestoredToken: Sendable, Hashable {
        public var value: String
        public var fetchedAt: Date

        public init(value: String, fetchedAt: Date) {
            self.value = value
            self.fetchedAt = fetchedAt
        }
    }

    public init(
        lifecycleProfile: WAFLifecycleProfile = .ios,
        lifecycle: WAFLifecycleState = .foreground,
        jitter: Bool = true,
        randomUnit: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        cookieSecure: Bool = false,
        restoredToken: RestoredToken? = nil,
        persist: (@Sendable (WAFTokenRecord) -> Void)? = nil,
        snapshotChanged: (@Sendable () -> Void)? = nil,
        logger: Logger = Logger(label: "waf-token-provider")
    ) {
        self.lifecycleProfile = lifecycleProfile
        self.lifecycle = lifecycle
        self.jitter = jitter
        self.randomUnit = randomUnit
        self.cookieSecure = cookieSecure
        self.restoredToken = restoredToken
        self.persist = persist
        self.snapshotChanged = snapshotChanged
        self.logger = logger
    }
}
