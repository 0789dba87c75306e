/// The waits of the retry rules, as functions of the configuration and one random draw.
struct RetrySchedule {
    static let initialBackoff: Duration = .milliseconds(100)
    /// RET-7: jitter may shorten the periodic refresh to 0.9 × its delay …
    static let refreshJitterFloor = 0.9
    /// … and an error-phase wait to 0.5 × `maxErrorTokenRefreshDelayMsec`.
    static let errorPhaseJitterFloor = 0.5

    let configuration: WAFConfiguration
    let jitter: Bool
    let randomUnit: Double

    /// RET-1: retry `n` (1…) waits min(100 ms × 2^(n−1), maxErrorTokenRefreshDelayMsec). Exact.
    func backoff(retry n: Int) -> Duration {
        precondition(n >= 1, "retries are numbered from 1")
        // 100 ms × 2^9 already exceeds the largest allowed maximum (30 s); cap the shift there.
        let doubled = Self.initialBackoff * (1 << min(n - 1, 20))
        return min(doubled, configuration.maxErrorTokenRefreshDelay)
    }

    /// RET-2 with RET-7: the wait between attempts once the backoff retries are spent.
    func errorPhaseWait() -> Duration {
        jittered(configuration.maxErrorTokenRefreshDelay, floor: Self.errorPhaseJitterFloor)
    }

    /// RET-6 with RET-7: the wait from a success to the next periodic refresh.
    func refreshWait() -> Duration {
        jittered(configuration.tokenRefreshDelay, floor: Self.refreshJitterFloor)
    }

    /// A wait in [floor × maximum, maximum]: jitter only ever shortens (RET-7).
    private func jittered(_ maximum: Duration, floor: Double) -> Duration {
        guard jitter else { return maximum }
        let unit = randomUnit.isNaN ? 1 : min(1, max(0, randomUnit))
        return maximum.scaled(by: floor + (1 - floor) * unit)
    }
}
