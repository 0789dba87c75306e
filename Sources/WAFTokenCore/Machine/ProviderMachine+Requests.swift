#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ProviderMachine {
    // MARK: Requests

    /// TOK-3, RET-8: a fresh token is answered at once; otherwise the caller waits for the attempt
    /// in flight, or one starts now with a full retry budget.
    mutating func requested(_ id: WaiterID, _ request: Request) {
        let waiter = Waiter(id: id, request: request)
        guard !stopped else { return answer(waiter, .failure(.unexpected(WAFProviderShutDownError()))) }
        if request == .ready(force: false), backgroundRefresh, let cached, isFresh(cached) {
            return answer(waiter, .success(cached.token))
        }
        if case .ready = request, !backgroundRefresh { keepTryingOnDemand = true }
        waiters.append(waiter)
        if let fetch {
            // TOK-4: join the attempt in flight. A cancelled one cannot be joined, but its end
            // starts a new attempt for the waiters.
            if !fetch.cancelled { restartSequenceAfterAttempt = true }
            return
        }
        failuresInSequence = 0
        beginAttempt()
    }

    // MARK: Loading (OBJ-3, TOK-8)

    /// A token from elsewhere, fetched at `fetchedAt`. It never replaces a cached token fetched
    /// later, never answers waiters (they want what a fetch brings) and never cancels a fetch.
    mutating func load(_ value: String, fetchedAt: Date) {
        guard !stopped else { return }
        let age = FetchTime.trustedAge(of: fetchedAt, at: clock.wall)
        if let current = cached, !current.untrustedTime, age == nil || fetchedAt <= current.token.fetchedAt { return }
        let loaded: CachedToken
        if let age {
            let token = WAFToken(value: value, fetchedAt: fetchedAt, fetchedAtMonotonic: now - age)
            loaded = CachedToken(token: token, origin: .loaded, loadedStale: age > configuration.tokenRefreshDelay, untrustedTime: false)
        } else {
            // Its age is unknown: counted as fetched now for display and the cookie, but stale.
            let token = WAFToken(value: value, fetchedAt: clock.wall, fetchedAtMonotonic: now)
            loaded = CachedToken(token: token, origin: .loaded, loadedStale: true, untrustedTime: true)
        }
        let retrying = consecutiveFailures > 0 && next != nil
        if fetch != nil || !waiters.isEmpty || (retrying && loaded.loadedStale) {
            // The fetch in flight, or the retries under way, go on; the token is only cached.
            return cache(loaded)
        }
        adopt(loaded)
        guard backgroundRefresh else { return }
        // Stale: refresh at once (TOK-8); fresh: on the schedule of a token fetched then (RET-6).
        scheduleNext(at: loaded.loadedStale ? now : loaded.token.fetchedAtMonotonic + retrySchedule.refreshWait())
    }
}
