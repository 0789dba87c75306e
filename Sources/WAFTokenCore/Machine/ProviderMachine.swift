#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The provider's decisions (docs/rules.md) as a value: it takes an event and the current
/// instant and returns the actions to perform. It holds no queue, timer, client or clock, so every
/// rule is checked without I/O; `ProviderDriver` performs the actions and feeds the results back,
/// tagged with the ids handed out here so that a late result of a cancelled fetch or timer is
/// ignored.
///
/// One attempt sequence serves everyone: background refresh, `onTokenReady` waiters and on-demand
/// fetches join the attempt in flight (TOK-4). Each waiter counts the failed attempts it has seen,
/// so it gets its own RET-3 answer after its own `maxRetryCount` retries (RET-8).
public struct ProviderMachine: Sendable {
    // MARK: State

    var settings: Settings
    var lifecycle: WAFLifecycleState = .foreground
    var cached: CachedToken?
    var fetch: Fetch?
    /// The next attempt: the periodic refresh, a retry, or an on-demand retry.
    var next: Armed?
    var pauseTimer: Armed?
    /// A scheduled attempt fell due while the app was inactive (LIFE-2); it runs on return (LIFE-4).
    var heldSince: MonotonicInstant?
    /// While inactive with background refresh: when inactivity began, or the fetch time of a token
    /// fetched since, whichever is later. Pause comes `tokenRefreshDelaySec` after it (LIFE-3).
    var inactiveSince: MonotonicInstant?
    var paused = false
    /// The refresh that fell due for the cached token failed, or was held or paused: the token is
    /// stale once older than `tokenRefreshDelaySec`, until a new one comes (TOK-7).
    var refreshFellBehind = false
    var waiters: [Waiter] = []
    /// Failed attempts since the sequence (re)started; picks the next backoff wait (RET-1).
    var failuresInSequence = 0
    /// A waiter joined the attempt in flight: if it fails, the backoff starts over for that waiter.
    var restartSequenceAfterAttempt = false
    var consecutiveFailures = 0
    var lastError: SdkError?
    /// Without background refresh, an `onTokenReady` keeps the provider trying until it gets a
    /// token, even after the waiter was told `allRetriesFailed` (RET-2, RET-3).
    var keepTryingOnDemand = false
    var counters = WAFProviderStatus.Counters()
    var stopped = false
    var lastID: UInt64 = 0
    var lastPublished: ProviderSnapshot?

    /// The instant of the event being handled, and the random draw that goes with it.
    var clock = Clock(monotonic: .origin, wall: Date(timeIntervalSince1970: 0), randomUnit: 1)
    var actions: [Action] = []

    public init(settings: Settings, lifecycle: WAFLifecycleState = .foreground) {
        self.settings = settings
        self.lifecycle = lifecycle
    }

    /// Handles one event at `clock` and returns what to do, in order. What readers see is published
    /// first: answers and announcements are delivered on other threads, and whoever is told of a
    /// token must find it in `getToken()` (TOK-1).
    public mutating func handle(_ event: Event, at clock: Clock) -> [Action] {
        self.clock = clock
        actions = []
        switch event {
        case .start(let restored): start(restored: restored)
        case .fetchEnded(let id, let result): fetchEnded(id, result)
        case .timerFired(let id): timerFired(id)
        case .lifecycle(let state): setLifecycle(state)
        case .request(let id, let request): requested(id, request)
        case .withdraw(let id): waiters.removeAll { $0.id == id }
        case .load(let value, let fetchedAt): load(value, fetchedAt: fetchedAt ?? clock.wall)
        case .reconfigure(let settings): reconfigure(settings)
        case .callbackFailed(let description):
            counters.callbackFailures += 1
            announce(.callbackFailed(description))
        case .stop: stop()
        }
        publishIfChanged()
        let done = actions
        actions = []
        return done
    }

    // MARK: Derived state

    var configuration: WAFConfiguration { settings.configuration }
    var backgroundRefresh: Bool { configuration.backgroundRefreshEnabled }
    var isActive: Bool { settings.profile.isActive(lifecycle) }
    var now: MonotonicInstant { clock.monotonic }
    var identity: WAFTokenIdentity { configuration.identity }
    var retrySchedule: RetrySchedule {
        RetrySchedule(configuration: configuration, jitter: settings.jitter, randomUnit: clock.randomUnit)
    }

    /// TOK-7 and TOK-9, for the cached token now.
    var freshness: Freshness {
        Freshness(
            alwaysStale: paused || cached?.loadedStale == true,
            staleOnceOld: !backgroundRefresh || refreshFellBehind,
            refreshInFirstAttempt: fetch.map { !$0.cancelled } ?? false,
            refreshDueAt: next?.at)
    }

    func isFresh(_ token: CachedToken) -> Bool {
        !freshness.isStale(age: token.token.age(at: now), delay: configuration.tokenRefreshDelay, now: now)
    }

    /// A monotonic instant on the wall clock, for what people read.
    func wall(_ instant: MonotonicInstant) -> Date {
        clock.wall.addingTimeInterval((instant - now).seconds)
    }

    var lifecycleStatus: WAFProviderStatus.Lifecycle {
        .init(state: lifecycle, profile: settings.profile, active: isActive, paused: paused)
    }

    // MARK: Effects

    mutating func emit(_ action: Action) {
        actions.append(action)
    }

    mutating func announce(_ event: WAFProviderEvent) {
        actions.append(.announce(event))
    }

    mutating func makeID() -> ID {
        lastID &+= 1
        return ID(rawValue: lastID)
    }

    /// Arms the next attempt for `instant`, replacing any.
    mutating func armNext(at instant: MonotonicInstant) {
        cancelNext()
        let id = makeID()
        next = Armed(id: id, at: instant)
        emit(.armTimer(id, at: instant))
    }

    mutating func cancelNext() {
        if let next { emit(.cancelTimer(next.id)) }
        next = nil
    }

    mutating func cancelPauseTimer() {
        if let pauseTimer { emit(.cancelTimer(pauseTimer.id)) }
        pauseTimer = nil
    }

    mutating func publishIfChanged() {
        let snapshot = self.snapshot
        guard snapshot != lastPublished else { return }
        lastPublished = snapshot
        actions.insert(.publish(snapshot), at: 0)
    }
}
