extension ProviderMachine {
    /// The app moved to `state` (LIFE-1…4).
    mutating func setLifecycle(_ state: WAFLifecycleState) {
        guard !stopped, state != lifecycle else { return }
        let wasActive = isActive
        lifecycle = state
        activityChanged(wasActive: wasActive)
        announce(.lifecycleChanged(lifecycleStatus))
    }

    mutating func activityChanged(wasActive: Bool) {
        guard backgroundRefresh, isActive != wasActive else { return }
        if isActive { becameActive() } else { becameInactive() }
    }

    /// LIFE-2: no request of its own while inactive. A fetch nobody waits for is cancelled; it is
    /// due again on return.
    private mutating func becameInactive() {
        inactiveSince = now
        updatePause()
        if waiters.isEmpty { cancelFetch() }
    }

    /// LIFE-4: after a pause, or with a refresh due, refresh at once; else keep the held schedule.
    private mutating func becameActive() {
        let wasPaused = paused
        inactiveSince = nil
        cancelPauseTimer()
        paused = false
        guard fetch == nil else { return }  // its end plans what follows
        if wasPaused {
            failuresInSequence = 0
            beginAttempt()
        } else if next == nil {
            beginAttempt()  // held (a hold drops the pending wait), or nothing was scheduled
        }
    }

    /// LIFE-3: paused the first instant after `tokenRefreshDelaySec` of inactivity.
    mutating func updatePause() {
        cancelPauseTimer()
        guard let since = inactiveSince else {
            paused = false
            return
        }
        let at = since + configuration.tokenRefreshDelay + .nanoseconds(1)
        if at <= now {
            if !paused { pause() }
        } else {
            let wasPaused = paused
            paused = false
            let id = makeID()
            pauseTimer = Armed(id: id, at: at)
            emit(.armTimer(id, at: at))
            if wasPaused { announce(.lifecycleChanged(lifecycleStatus)) }
        }
    }

    mutating func pause() {
        paused = true
        refreshFellBehind = true
        announce(.lifecycleChanged(lifecycleStatus))
    }
}
