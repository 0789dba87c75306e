/// TOK-7, in one place: whether a cached token is reported stale.
///
/// A token is fresh while no older than `tokenRefreshDelaySec`, and still fresh after that while the
/// refresh that fell due is in its first attempt. It turns stale only when that refresh failed, is
/// held for an inactive app (LIFE-2), refresh is paused (LIFE-3), or the token was loaded stale
/// (TOK-8). So an active provider whose token service answers never reports its token stale, with
/// or without jitter, and readiness does not flap during a routine refresh.
public struct Freshness: Sendable, Hashable {
    /// Stale whatever its age: refresh paused, or loaded stale.
    public var alwaysStale: Bool
    /// Stale once older than `tokenRefreshDelaySec`: the refresh that fell due failed or is held,
    /// or there is no background refresh to fall due at all.
    public var staleOnceOld: Bool

    public init(alwaysStale: Bool, staleOnceOld: Bool) {
        self.alwaysStale = alwaysStale
        self.staleOnceOld = staleOnceOld
    }

    public func isStale(age: Duration, delay: Duration) -> Bool {
        alwaysStale || (staleOnceOld && age > delay)
    }
}
