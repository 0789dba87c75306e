extension ProviderMachine {
    // MARK: Starting an attempt

    /// Starts an attempt now, for everyone waiting (TOK-4); the pending wait is dropped.
    mutating func beginAttempt() {
        precondition(fetch == nil, "TOK-4: one fetch at a time")
        cancelNext()
        heldSince = nil
        let id = makeID()
        counters.fetchAttempts += 1
        fetch = Fetch(id: id, identity: identity)
        emit(.startFetch(id, WAFTokenFetchRequest(configuration: configuration, existingToken: cached?.token.value)))
    }

    /// Cancels the fetch in flight. It stays in flight until it reports back, so that the next one
    /// cannot overlap it; what follows is planned then (`fetchEnded`).
    mutating func cancelFetch() {
        guard var running = fetch, !running.cancelled else { return }
        running.cancelled = true
        fetch = running
        emit(.cancelFetch(running.id))
    }

    // MARK: An attempt ended

    mutating func fetchEnded(_ id: ID, _ result: Result<String, SdkError>) {
        guard let ended = fetch, ended.id == id else { return }  // a fetch dropped by stop
        fetch = nil
        switch result {
        case .success(let value) where ended.identity == identity:
            // Also for a fetch cancelled on inactivity that made it anyway: a token is a token.
            counters.fetchSuccesses += 1
            fetched(value)
        case .failure(let error) where !ended.cancelled:
            attemptFailed(error)
        case .failure, .success:
            // Not a failure: nobody wanted it any more, or it was for the old identity.
            replanAfterCancelledFetch()
        }
    }

    private mutating func replanAfterCancelledFetch() {
        if !waiters.isEmpty || (backgroundRefresh && isActive) || (!backgroundRefresh && keepTryingOnDemand) {
            beginAttempt()
        } else if backgroundRefresh {
            hold(dueAt: now)
        }
    }

    /// A new token: cache it, answer everyone, schedule the next refresh (RET-6).
    private mutating func fetched(_ value: String) {
        let token = WAFToken(value: value, fetchedAt: clock.wall, fetchedAtMonotonic: now)
        adopt(CachedToken(token: token, origin: .fetched, loadedStale: false, untrustedTime: false))
        let answered = waiters
        waiters = []
        for waiter in answered { answer(waiter, .success(token)) }
        if backgroundRefresh {
            armNext(at: now + retrySchedule.refreshWait())
        } else {
            cancelNext()
        }
    }

    /// Caches `token` as good news: the failure count starts over.
    mutating func adopt(_ token: CachedToken) {
        refreshFellBehind = false
        consecutiveFailures = 0
        failuresInSequence = 0
        restartSequenceAfterAttempt = false
        lastError = nil
        keepTryingOnDemand = false
        cache(token)
    }

    /// Caches `token` and tells everyone: observers, the cookie, storage (COOK-4).
    mutating func cache(_ token: CachedToken) {
        cached = token
        if let since = inactiveSince, !token.untrustedTime {
            // A token fetched while inactive (an explicit request) is fresh until it ages.
            inactiveSince = max(since, token.token.fetchedAtMonotonic)
            updatePause()
        }
        // Stored before anyone is told: whoever hears of the token (a delivery action, `exec`'s
        // supervisor) finds it in the files once storage has written what it was given.
        emit(.persist(record(for: token)))
        announce(.tokenUpdated(token.token, origin: token.origin))
    }

    func record(for token: CachedToken?) -> WAFTokenRecord {
        let cookie = token.flatMap { token in
            configuration.setTokenCookie
                ? WAFCookie(
                    token: token.token, domainName: configuration.domainName, path: configuration.tokenCookiePath,
                    secure: settings.cookieSecure)
                : nil
        }
        return WAFTokenRecord(identity: identity, token: token?.token, cookie: cookie, origin: token?.origin ?? .fetched)
    }

    private mutating func attemptFailed(_ error: SdkError) {
        counters.fetchFailures += 1
        consecutiveFailures += 1
        refreshFellBehind = true
        lastError = error
        if restartSequenceAfterAttempt {
            failuresInSequence = 1
            restartSequenceAfterAttempt = false
        } else {
            failuresInSequence += 1
        }

        let maxRetryCount = configuration.maxRetryCount
        var remaining: [Waiter] = []
        for var waiter in waiters {
            waiter.failedAttempts += 1
            if waiter.failedAttempts > maxRetryCount {
                // RET-3 for onTokenReady and refreshes; RET-4 (the previous token) for on-demand.
                answer(waiter, .failure(.allRetriesFailed(error)))
            } else {
                remaining.append(waiter)
            }
        }
        waiters = remaining

        let wait: Duration?
        if !backgroundRefresh && !keepTryingOnDemand && waiters.isEmpty {
            wait = nil  // RET-4: on-demand fetching gives up.
        } else if failuresInSequence <= maxRetryCount {
            wait = retrySchedule.backoff(retry: failuresInSequence)  // RET-1
        } else {
            wait = retrySchedule.errorPhaseWait()  // RET-2
        }
        if let wait { armNext(at: now + wait) }
        announce(.refreshFailed(error, consecutiveFailures: consecutiveFailures, nextAttemptAt: wait.map { wall(now + $0) }))
    }

    /// OBJ-4: a result callback gets exactly one of token and error. An on-demand caller gets the
    /// token, or on failure the previous one (RET-4).
    mutating func answer(_ waiter: Waiter, _ outcome: Result<WAFToken, SdkError>) {
        switch (waiter.request, outcome) {
        case (.ready, .success(let token)): emit(.answer(waiter.id, .token(token)))
        case (.ready, .failure(let error)): emit(.answer(waiter.id, .failure(error)))
        case (.onDemand, .success(let token)): emit(.answer(waiter.id, .onDemand(token)))
        case (.onDemand, .failure): emit(.answer(waiter.id, .onDemand(cached?.token)))
        }
    }

    // MARK: Timers

    mutating func timerFired(_ id: ID) {
        if let due = next, due.id == id {
            next = nil
            nextFellDue(at: due.at)
        } else if let due = pauseTimer, due.id == id {
            pauseTimer = nil
            pause()
        }
    }

    /// The next attempt is due: run it, or hold it while the app is inactive (LIFE-2).
    mutating func nextFellDue(at instant: MonotonicInstant) {
        guard fetch == nil, !stopped else { return }
        if waiters.isEmpty {
            if backgroundRefresh && !isActive { return hold(dueAt: instant) }
            if !backgroundRefresh && !keepTryingOnDemand { return }
        }
        beginAttempt()
    }

    /// The next attempt for `instant`: armed, or run (or held) now when it is already due.
    mutating func scheduleNext(at instant: MonotonicInstant) {
        if instant > now {
            armNext(at: instant)
        } else {
            cancelNext()
            nextFellDue(at: instant)
        }
    }

    mutating func hold(dueAt instant: MonotonicInstant) {
        cancelNext()
        heldSince = instant
        refreshFellBehind = true
        announce(.refreshHeld(dueAt: wall(instant)))
    }
}
