extension ProviderMachine {
    /// A consistent snapshot for `/v1/status` and the daemon's status line.
    public func status(at clock: Clock) -> WAFProviderStatus {
        var machine = self
        machine.clock = clock
        return machine.status
    }

    private var status: WAFProviderStatus {
        let refreshState: WAFProviderStatus.RefreshState
        if stopped {
            refreshState = .idle
        } else if !backgroundRefresh {
            refreshState = .disabled
        } else if paused {
            refreshState = .paused
        } else if consecutiveFailures > 0 {
            refreshState = .retrying
        } else if next != nil || fetch != nil || heldSince != nil {
            refreshState = .scheduled
        } else {
            refreshState = .idle
        }
        let nextAt = next?.at ?? heldSince
        return WAFProviderStatus(
            lifecycle: lifecycleStatus,
            refresh: .init(
                state: refreshState, nextAt: nextAt.map(wall), held: heldSince != nil,
                inFlight: fetch != nil, consecutiveFailures: consecutiveFailures, lastError: lastError,
                pendingRequests: waiters.count),
            token: cached.map { cached in
                .init(
                    fingerprint: cached.token.fingerprint, fetchedAt: cached.token.fetchedAt,
                    age: cached.token.age(at: now), stale: !isFresh(cached))
            },
            counters: counters,
            backgroundRefreshEnabled: backgroundRefresh)
    }

    /// What a model checker needs to see from outside: is anything still armed or in flight?
    public var isQuiescent: Bool { fetch == nil && next == nil && pauseTimer == nil && waiters.isEmpty }

    /// The lifecycle state the machine is in.
    public var lifecycleState: WAFLifecycleState { lifecycle }

    /// The settings in force.
    public var currentSettings: Settings { settings }
}
