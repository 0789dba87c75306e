/// TOK-7 and TOK-9, in one place: whether a cached token is reported stale.
///
/// A token is fresh while no older than `tokenRefreshDelaySec`, and still fresh after that while
/// the refresh that fell due is in its first attempt. It turns stale when that refresh failed, is
/// held for an inactive app (LIFE-2), refresh is paused (LIFE-3), or the token was loaded stale
/// (TOK-8). So an active provider whose token service answers never reports its token stale, with
/// or without jitter, and readiness does not flap during a routine refresh.
///
/// A timer can be late: the machine slept, the process was stopped, the CPU was starved. A token
/// older than the delay whose due refresh has not started is not trusted then (TOK-9): it is stale
/// once its refresh is later than `lateTimerTolerance`, the scheduling slack a running process
/// always has; the refresh starts within that time of the process running again.
public struct Freshness: Sendable, Hashable {
    /// How late a due refresh may start before its token reads stale: the wake-up of a timer that
    /// fires on time takes microseconds; one second is what TOK-9 grants a process that ran again.
    public static let lateTimerTolerance = Duration.seconds(1)

    /// Stale whatever its age: refresh paused, or loaded stale.
    public var alwaysStale: Bool
    /// Stale once older than `tokenRefreshDelaySec`: the refresh that fell due failed or is held,
    /// or there is no background refresh to fall due at all.
    public var staleOnceOld: Bool
    /// A refresh has started and is in its first attempt: an older token stays fresh meanwhile.
    public var refreshInFirstAttempt: Bool
    /// When the next refresh is due, if one is armed. Past it by more than the tolerance, with no
    /// attempt under way, the timer is late and an older token is not trusted.
    public var refreshDueAt: MonotonicInstant?

    public init(alwaysStale: Bool, staleOnceOld: Bool, refreshInFirstAttempt: Bool = false, refreshDueAt: MonotonicInstant? = nil) {
        self.alwaysStale = alwaysStale
        self.staleOnceOld = staleOnceOld
        self.refreshInFirstAttempt = refreshInFirstAttempt
        self.refreshDueAt = refreshDueAt
    }

    /// Whether a token `age` old reads stale at `now`, with `tokenRefreshDelaySec` = `delay`.
    public func isStale(age: Duration, delay: Duration, now: MonotonicInstant) -> Bool {
        if alwaysStale { return true }
        guard age > delay else { return false }
        if staleOnceOld { return true }
        if refreshInFirstAttempt { return false }
        // Its refresh is not under way: fresh only while it is not yet due (a reload kept the
        // schedule of a longer delay, RELOAD-1) or its timer is merely on its way.
        guard let due = refreshDueAt else { return true }
        return now > due + Self.lateTimerTolerance
    }
}
