/// What readers off the provider's state context see: the configuration in force, the cached
/// token and what decides its freshness. `getToken()` with background refresh reads this and
/// nothing else, so the hot path costs one lock and no trip through the state context.
public struct ProviderSnapshot: Sendable, Hashable {
    public var settings: ProviderMachine.Settings
    public var token: WAFToken?
    public var freshness: Freshness
    public var stopped: Bool

    public var configuration: WAFConfiguration { settings.configuration }

    /// The cached token with its age and staleness at `now` (TOK-7).
    public func cachedToken(at now: MonotonicInstant) -> (token: WAFToken, age: Duration, stale: Bool)? {
        guard let token else { return nil }
        let age = token.age(at: now)
        return (token, age, freshness.isStale(age: age, delay: configuration.tokenRefreshDelay, now: now))
    }
}

extension ProviderMachine {
    var snapshot: ProviderSnapshot {
        ProviderSnapshot(settings: settings, token: cached?.token, freshness: freshness, stopped: stopped)
    }
}
