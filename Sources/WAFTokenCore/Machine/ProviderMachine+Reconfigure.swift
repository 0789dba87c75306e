extension ProviderMachine {
    // MARK: Start

    /// TOK-1: with background refresh the first fetch starts at once, unless a restored token is
    /// still fresh, which is then served and refreshed on schedule. A provider that starts while
    /// the app is inactive holds that first fetch until the app is active again (LIFE-2).
    mutating func start(restored: WAFTokenProviderOptions.RestoredToken?) {
        if backgroundRefresh, !isActive {
            inactiveSince = now
            updatePause()
        }
        if let restored {
            load(restored.value, fetchedAt: restored.fetchedAt)
        }
        if cached == nil, backgroundRefresh, fetch == nil, next == nil, heldSince == nil {
            if isActive { beginAttempt() } else { hold(dueAt: now) }
        }
    }

    // MARK: Reconfigure (docs/rules.md, RELOAD-2)

    /// Applies new settings. The same identity keeps the token, the schedule and the retry
    /// position: the new values apply from the next wait on, so a burst of reloads is never a burst
    /// of requests. A new identity drops the token everywhere at once and starts over with a fetch
    /// and a fresh RET-1 sequence.
    mutating func reconfigure(_ new: Settings) {
        guard !stopped, new != settings else { return }
        let old = settings
        let wasActive = isActive
        let before = lifecycleStatus
        settings = new
        if new.configuration.identity != old.configuration.identity {
            switchIdentity()
        } else {
            keepIdentity(old: old, wasActive: wasActive)
        }
        if lifecycleStatus != before { announce(.lifecycleChanged(lifecycleStatus)) }
    }

    private mutating func keepIdentity(old: Settings, wasActive: Bool) {
        let oldConfiguration = old.configuration
        if backgroundRefresh != oldConfiguration.backgroundRefreshEnabled {
            backgroundRefreshToggled()
        } else if backgroundRefresh, isActive != wasActive {
            // A new lifecycle profile made the app active or inactive.
            activityChanged(wasActive: wasActive)
        } else if inactiveSince != nil, configuration.tokenRefreshDelay != oldConfiguration.tokenRefreshDelay {
            updatePause()
        }
        // The cookie follows the cookie settings; storage gets it anew (new paths, a new cookie).
        if let cached { emit(.persist(record(for: cached))) }
    }

    private mutating func backgroundRefreshToggled() {
        if backgroundRefresh {
            // TOK-1: keep a token cached from now on.
            keepTryingOnDemand = false
            if isActive {
                inactiveSince = nil
            } else {
                inactiveSince = now
                updatePause()
            }
            guard fetch == nil, waiters.isEmpty else { return }
            if let cached, isFresh(cached), consecutiveFailures == 0 {
                scheduleNext(at: cached.token.fetchedAtMonotonic + retrySchedule.refreshWait())
            } else if next == nil {
                scheduleNext(at: now)
            }
        } else {
            // On demand only from now on: no pause, no periodic refresh; retries only for waiters.
            inactiveSince = nil
            cancelPauseTimer()
            paused = false
            heldSince = nil
            if waiters.isEmpty { cancelNext() }
        }
    }

    private mutating func switchIdentity() {
        cancelNext()
        heldSince = nil
        cached = nil
        refreshFellBehind = false
        consecutiveFailures = 0
        failuresInSequence = 0
        restartSequenceAfterAttempt = false
        lastError = nil
        inactiveSince = nil
        cancelPauseTimer()
        paused = false
        if backgroundRefresh, !isActive {
            inactiveSince = now
            updatePause()
        }
        // The waiters want a token of the new identity, with a full retry budget.
        for index in waiters.indices { waiters[index].failedAttempts = 0 }
        announce(.tokenDropped)
        emit(.persist(record(for: nil)))
        if fetch != nil {
            cancelFetch()  // the new identity's fetch starts when this one has unwound (TOK-4)
        } else if !waiters.isEmpty || backgroundRefresh || keepTryingOnDemand {
            scheduleNext(at: now)
        }
    }

    // MARK: Stop

    /// Stops timers and the fetch in flight, and answers every waiter.
    mutating func stop() {
        guard !stopped else { return }
        stopped = true
        cancelNext()
        cancelPauseTimer()
        if let fetch { emit(.cancelFetch(fetch.id)) }
        fetch = nil
        heldSince = nil
        let pending = waiters
        waiters = []
        for waiter in pending { answer(waiter, .failure(.unexpected(WAFProviderShutDownError()))) }
    }
}
