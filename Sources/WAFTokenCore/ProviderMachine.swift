import Logging
import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The provider's state and rules. Every method except the `published` reads runs on the
/// scheduler's state context, which is what makes the unchecked `Sendable` sound.
///
/// One attempt sequence serves everyone: background refresh, `onTokenReady` waiters and on-demand
/// fetches join the attempt in flight (TOK-4). Each waiter counts the failed attempts it has seen,
/// so it gets its own RET-3 answer after its own `maxRetryCount` retries (RET-8).
final class ProviderMachine: @unchecked Sendable {
    /// What readers off the state queue may see: written on the state context after every change.
    struct Published: Sendable {
        var configuration: WAFConfiguration
        var token: WAFToken?
        var paused: Bool
        var isShutDown: Bool
    }

    struct Observer {
        let yield: @Sendable (WAFProviderEvent) -> Void
        let finish: @Sendable () -> Void
    }

    private struct Waiter {
        enum Kind {
            /// `onTokenReady` and forced refreshes: a token, or `allRetriesFailed` (RET-3).
            case ready(WAFTokenResultCallback)
            /// On-demand `getToken()` without background refresh: a token, or the previous one (RET-4).
            case onDemand(@Sendable (WAFToken?) -> Void)
        }

        let kind: Kind
        var failedAttempts = 0
    }

    private struct Attempt {
        let id: UInt64
        let task: WAFCancellable
        /// Cancelled because the app went inactive with nobody waiting (LIFE-2): its failure is not
        /// a failure, the refresh is only due again.
        var abandoned = false
    }

    private struct NextAttempt {
        let generation: UInt64
        let at: MonotonicInstant
        let timer: WAFCancellable
    }

    let client: any WAFTokenServiceClient
    let scheduler: any WAFScheduler
    let cookieManager: WAFCookieManager
    let logger: Logger
    let randomUnit: @Sendable () -> Double
    let published: NIOLockedValueBox<Published>

    private var configuration: WAFConfiguration
    private var profile: WAFLifecycleProfile
    private var jitter: Bool
    private var cookieSecure: Bool
    private var lifecycle: WAFLifecycleState = .foreground
    /// While inactive with background refresh: when inactivity began, or the fetch time of a token
    /// fetched since, whichever is later. Pause comes `tokenRefreshDelaySec` after it (LIFE-3).
    private var pauseReference: MonotonicInstant?
    private var paused = false
    private var pauseTimer: (generation: UInt64, timer: WAFCancellable)?
    private var token: WAFToken?
    private var attempt: Attempt?
    private var next: NextAttempt?
    /// A scheduled attempt fell due while the app was inactive (LIFE-2); it runs on return (LIFE-4).
    private var heldSince: MonotonicInstant?
    private var waiters: [Waiter] = []
    /// Failed attempts since the sequence (re)started; picks the next backoff wait (RET-1).
    private var failuresInSequence = 0
    /// A waiter joined the attempt in flight: if it fails, the backoff starts over for that waiter.
    private var restartSequenceAfterAttempt = false
    private var consecutiveFailures = 0
    private var lastError: SdkError?
    /// Without background refresh, an `onTokenReady` keeps the provider trying until it gets a
    /// token, even after the waiter was told `allRetriesFailed` (RET-2, RET-3).
    private var keepTryingOnDemand = false
    private var observers: [UInt64: Observer] = [:]
    private var counters = WAFProviderStatus.Counters()
    private var isShutDown = false
    private var generation: UInt64 = 0

    init(
        configuration: WAFConfiguration, client: any WAFTokenServiceClient, scheduler: any WAFScheduler,
        options: WAFTokenProviderOptions
    ) {
        self.configuration = configuration
        self.client = client
        self.scheduler = scheduler
        profile = options.lifecycleProfile
        jitter = options.jitter
        cookieSecure = options.cookieSecure
        randomUnit = options.randomUnit
        logger = options.logger
        cookieManager = WAFCookieManager(settings: .init(configuration: configuration, secure: options.cookieSecure))
        published = NIOLockedValueBox(Published(configuration: configuration, token: nil, paused: false, isShutDown: false))
    }

    // MARK: Derived state

    private var isActive: Bool { profile.isActive(lifecycle) }
    private var now: MonotonicInstant { scheduler.now }
    private var retrySchedule: RetrySchedule {
        RetrySchedule(configuration: configuration, jitter: jitter, randomUnit: randomUnit)
    }

    /// TOK-3: younger than `tokenRefreshDelaySec` and refresh not paused.
    private func isFresh(_ token: WAFToken) -> Bool {
        token.age(at: now) < configuration.tokenRefreshDelay && !paused
    }

    private func wallClock(_ instant: MonotonicInstant) -> Date {
        scheduler.wallClockNow.addingTimeInterval((instant - now).seconds)
    }

    private func nextGeneration() -> UInt64 {
        generation &+= 1
        return generation
    }

    private func publish() {
        let snapshot = Published(configuration: configuration, token: token, paused: paused, isShutDown: isShutDown)
        published.withLockedValue { $0 = snapshot }
    }

    private func emit(_ event: WAFProviderEvent) {
        for observer in observers.values { observer.yield(event) }
    }

    // MARK: Start

    /// TOK-1: with background refresh the first fetch starts at once, unless a restored token is
    /// still fresh, which is then served and refreshed on schedule.
    func start(restoredToken: WAFTokenProviderOptions.RestoredToken?) {
        if let restoredToken {
            load(value: restoredToken.value, fetchedAt: restoredToken.fetchedAt)
        } else if configuration.backgroundRefreshEnabled {
            beginAttempt()
        }
    }

    // MARK: Requests

    /// TOK-3, RET-8: a fresh token is answered at once; otherwise the caller waits for the attempt
    /// in flight or starts one now with a full retry budget. `force` skips the freshness check.
    func requestReady(force: Bool, _ callback: @escaping WAFTokenResultCallback) {
        guard !isShutDown else {
            scheduler.deliver { callback(nil, .unexpected(WAFProviderShutDownError())) }
            return
        }
        if !force, configuration.backgroundRefreshEnabled, let token, isFresh(token) {
            scheduler.deliver { callback(token, nil) }
            return
        }
        if !configuration.backgroundRefreshEnabled { keepTryingOnDemand = true }
        addWaiter(.ready(callback))
    }

    /// TOK-2, RET-4: an on-demand fetch without background refresh.
    func requestOnDemand(_ completion: @escaping @Sendable (WAFToken?) -> Void) {
        guard !isShutDown else {
            let token = token
            scheduler.deliver { completion(token) }
            return
        }
        addWaiter(.onDemand(completion))
    }

    private func addWaiter(_ kind: Waiter.Kind) {
        waiters.append(Waiter(kind: kind))
        if let attempt {
            // TOK-4: join the attempt in flight. An abandoned one cannot be joined, but its end
            // starts a new attempt for the waiters.
            if !attempt.abandoned { restartSequenceAfterAttempt = true }
            return
        }
        failuresInSequence = 0
        beginAttempt()
    }

    /// OBJ-4: a result callback gets exactly one of token and error. An on-demand caller gets the
    /// token, or on failure the previous one (RET-4).
    private func answer(_ waiter: Waiter, _ outcome: Result<WAFToken, SdkError>) {
        switch (waiter.kind, outcome) {
        case (.ready(let callback), .success(let token)):
            scheduler.deliver { callback(token, nil) }
        case (.ready(let callback), .failure(let error)):
            scheduler.deliver { callback(nil, error) }
        case (.onDemand(let completion), _):
            let token = (try? outcome.get()) ?? token
            scheduler.deliver { completion(token) }
        }
    }

    // MARK: Attempts

    private func beginAttempt() {
        cancelNext()
        heldSince = nil
        let id = nextGeneration()
        counters.fetchAttempts += 1
        let request = WAFTokenFetchRequest(configuration: configuration, existingToken: token?.value)
        let task = scheduler.spawn { [client, scheduler] in
            let result: Result<String, SdkError>
            do throws(SdkError) {
                result = .success(try await client.fetchToken(request))
            } catch {
                result = .failure(error)
            }
            scheduler.execute { self.attemptEnded(id: id, result: result) }
        }
        attempt = Attempt(id: id, task: task)
        logger.debug("token fetch started", metadata: ["attempt": "\(counters.fetchAttempts)"])
    }

    private func attemptEnded(id: UInt64, result: Result<String, SdkError>) {
        // An attempt dropped by a reconfiguration or shutdown reports into the void.
        guard let ended = attempt, ended.id == id else { return }
        attempt = nil
        switch result {
        case .success(let value):
            counters.fetchSuccesses += 1
            adopt(WAFToken(value: value, fetchedAt: scheduler.wallClockNow, fetchedAtMonotonic: now), origin: .fetched)
        case .failure where ended.abandoned:
            if !waiters.isEmpty || isActive {
                failuresInSequence = 0
                beginAttempt()
            } else {
                hold(dueAt: now)
            }
        case .failure(let error):
            attemptFailed(error)
        }
    }

    /// A new token: cache it, write the cookie, answer everyone, schedule the next refresh (RET-6).
    private func adopt(_ newToken: WAFToken, origin: WAFTokenOrigin) {
        token = newToken
        consecutiveFailures = 0
        failuresInSequence = 0
        restartSequenceAfterAttempt = false
        lastError = nil
        keepTryingOnDemand = false
        if let reference = pauseReference {
            // A token fetched while inactive (an explicit request) is fresh until it ages.
            pauseReference = max(reference, newToken.fetchedAtMonotonic)
            let wasPaused = paused
            paused = now - pauseReference! > configuration.tokenRefreshDelay
            schedulePause()
            if wasPaused != paused { emit(.lifecycleChanged(lifecycleStatus)) }
        }
        publish()
        cookieManager.store(newToken)
        logger.info(
            "token \(origin == .fetched ? "fetched" : "loaded")",
            metadata: ["token.fingerprint": "\(newToken.fingerprint)"])
        emit(.tokenUpdated(newToken, origin: origin))
        let answered = waiters
        waiters = []
        for waiter in answered { answer(waiter, .success(newToken)) }
        if configuration.backgroundRefreshEnabled {
            scheduleNext(at: newToken.fetchedAtMonotonic + retrySchedule.refreshWait())
        } else {
            cancelNext()
        }
    }

    private func attemptFailed(_ error: SdkError) {
        counters.fetchFailures += 1
        consecutiveFailures += 1
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
        if !configuration.backgroundRefreshEnabled && !keepTryingOnDemand && waiters.isEmpty {
            wait = nil  // RET-4: on-demand fetching gives up.
        } else if failuresInSequence <= maxRetryCount {
            wait = retrySchedule.backoff(retry: failuresInSequence)  // RET-1
        } else {
            wait = retrySchedule.errorPhaseWait()  // RET-2
        }
        if let wait { scheduleNext(at: now + wait) }
        logger.warning(
            "token fetch failed",
            metadata: [
                "error": "\(error.name)", "reason": "\(error.description)",
                "consecutive_failures": "\(consecutiveFailures)",
                "next_attempt_in": "\(wait.map { "\($0.seconds)s" } ?? "none")",
            ])
        emit(.refreshFailed(error, consecutiveFailures: consecutiveFailures, nextAttemptAt: wait.map { wallClock(now + $0) }))
    }

    // MARK: Timers

    private func scheduleNext(at instant: MonotonicInstant) {
        cancelNext()
        let generation = nextGeneration()
        let timer = scheduler.schedule(after: max(.zero, instant - now)) { self.nextFired(generation) }
        next = NextAttempt(generation: generation, at: instant, timer: timer)
    }

    private func cancelNext() {
        next?.timer.cancel()
        next = nil
    }

    private func nextFired(_ generation: UInt64) {
        guard let due = next, due.generation == generation else { return }
        next = nil
        guard attempt == nil else { return }
        // LIFE-2: background refresh makes no request while inactive; explicit waiters still do.
        if configuration.backgroundRefreshEnabled && !isActive && waiters.isEmpty {
            hold(dueAt: due.at)
            return
        }
        beginAttempt()
    }

    private func hold(dueAt instant: MonotonicInstant) {
        heldSince = instant
        logger.debug("refresh held while the app is inactive")
        emit(.refreshHeld(dueAt: wallClock(instant)))
    }

    // MARK: Lifecycle

    func setLifecycle(_ state: WAFLifecycleState) {
        guard !isShutDown, state != lifecycle else { return }
        let wasActive = isActive
        lifecycle = state
        applyActivityChange(wasActive: wasActive)
        logger.info("lifecycle changed", metadata: ["state": "\(state.rawValue)", "active": "\(isActive)"])
        emit(.lifecycleChanged(lifecycleStatus))
    }

    /// Applies the state `transform` picks from the current one, in one step on the state context.
    func updateLifecycle(_ transform: (WAFLifecycleState) -> WAFLifecycleState) -> WAFProviderStatus.Lifecycle {
        setLifecycle(transform(lifecycle))
        return lifecycleStatus
    }

    private func applyActivityChange(wasActive: Bool) {
        guard configuration.backgroundRefreshEnabled, isActive != wasActive else { return }
        if isActive { becameActive() } else { becameInactive() }
    }

    private func becameInactive() {
        pauseReference = now
        schedulePause()
        if var running = attempt, waiters.isEmpty, !running.abandoned {
            running.abandoned = true
            running.task.cancel()
            attempt = running
        }
    }

    /// LIFE-4: after a pause, or with a refresh due, refresh at once; else keep the held schedule.
    private func becameActive() {
        let wasPaused = paused
        pauseReference = nil
        pauseTimer?.timer.cancel()
        pauseTimer = nil
        paused = false
        publish()
        guard attempt == nil else { return }
        if wasPaused {
            failuresInSequence = 0
            beginAttempt()
        } else if next == nil {
            beginAttempt()
        }
    }

    private func schedulePause() {
        pauseTimer?.timer.cancel()
        pauseTimer = nil
        guard let reference = pauseReference, !paused else { return }
        // "Longer than" tokenRefreshDelaySec: the first instant after it.
        let at = reference + configuration.tokenRefreshDelay + .nanoseconds(1)
        let generation = nextGeneration()
        let timer = scheduler.schedule(after: max(.zero, at - now)) { self.pauseFired(generation) }
        pauseTimer = (generation, timer)
    }

    private func pauseFired(_ generation: UInt64) {
        guard pauseTimer?.generation == generation, pauseReference != nil else { return }
        pauseTimer = nil
        paused = true
        publish()
        logger.info("background refresh paused after inactivity")
        emit(.lifecycleChanged(lifecycleStatus))
    }

    private var lifecycleStatus: WAFProviderStatus.Lifecycle {
        .init(state: lifecycle, profile: profile, active: isActive, paused: paused)
    }

    // MARK: Loading, reconfiguring, stopping

    /// OBJ-3's `loadTokenIntoProvider`: a token from elsewhere, treated like a fetched one. An old
    /// one is cached as stale and, with background refresh, refreshed at once.
    func load(value: String, fetchedAt: Date) {
        guard !isShutDown else { return }
        let age = max(0, scheduler.wallClockNow.timeIntervalSince(fetchedAt))
        let loaded = WAFToken(
            value: value, fetchedAt: fetchedAt, fetchedAtMonotonic: now - .nanoseconds(Int64(age * 1e9)))
        adopt(loaded, origin: .loaded)
    }

    /// Applies a new configuration (the daemon's reload). The token survives unless the web ACL or
    /// the domain changed; whatever was scheduled is re-planned under the new rules.
    func reconfigure(
        _ newConfiguration: WAFConfiguration, profile newProfile: WAFLifecycleProfile, jitter newJitter: Bool,
        cookieSecure newCookieSecure: Bool
    ) {
        guard !isShutDown else { return }
        let identityChanged =
            newConfiguration.tokenServiceBaseURL != configuration.tokenServiceBaseURL
            || newConfiguration.domainName != configuration.domainName
        cancelNext()
        heldSince = nil
        if identityChanged {
            // A token for another web ACL or domain is of no use to anyone.
            attempt?.task.cancel()
            attempt = nil
            token = nil
            consecutiveFailures = 0
            lastError = nil
        }
        configuration = newConfiguration
        profile = newProfile
        jitter = newJitter
        cookieSecure = newCookieSecure
        cookieManager.update(settings: .init(configuration: newConfiguration, secure: newCookieSecure), token: token)

        if configuration.backgroundRefreshEnabled && !isActive {
            pauseReference = pauseReference ?? now
            paused = now - pauseReference! > configuration.tokenRefreshDelay
            schedulePause()
        } else {
            pauseReference = nil
            pauseTimer?.timer.cancel()
            pauseTimer = nil
            paused = false
        }
        publish()
        emit(.lifecycleChanged(lifecycleStatus))

        guard attempt == nil else { return }  // its end plans what follows, by the new rules
        if !waiters.isEmpty {
            failuresInSequence = 0
            beginAttempt()
        } else if configuration.backgroundRefreshEnabled {
            if let token, consecutiveFailures == 0 {
                scheduleNext(at: token.fetchedAtMonotonic + retrySchedule.refreshWait())
            } else {
                scheduleNext(at: now)
            }
        } else if keepTryingOnDemand {
            scheduleNext(at: now)
        }
    }

    func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        cancelNext()
        pauseTimer?.timer.cancel()
        pauseTimer = nil
        attempt?.task.cancel()
        attempt = nil
        heldSince = nil
        let pending = waiters
        waiters = []
        for waiter in pending { answer(waiter, .failure(.unexpected(WAFProviderShutDownError()))) }
        publish()
        let finished = observers
        observers = [:]
        for observer in finished.values { observer.finish() }
        logger.info("token provider stopped")
    }

    // MARK: Observers and status

    func addObserver(id: UInt64, _ observer: Observer) {
        if isShutDown {
            observer.finish()
        } else {
            observers[id] = observer
        }
    }

    func removeObserver(id: UInt64) {
        observers[id] = nil
    }

    func callbackThrew(_ error: any Error) {
        counters.callbackFailures += 1
        logger.error("Exception occurred in customer implementation of tokenResultCallback: \(error)")
        emit(.callbackFailed(String(describing: error)))
    }

    func status() -> WAFProviderStatus {
        let refreshState: WAFProviderStatus.RefreshState
        if isShutDown {
            refreshState = .idle
        } else if !configuration.backgroundRefreshEnabled {
            refreshState = .disabled
        } else if paused {
            refreshState = .paused
        } else if consecutiveFailures > 0 {
            refreshState = .retrying
        } else if next != nil || attempt != nil || heldSince != nil {
            refreshState = .scheduled
        } else {
            refreshState = .idle
        }
        let nextAt = next?.at ?? heldSince
        return WAFProviderStatus(
            lifecycle: lifecycleStatus,
            refresh: .init(
                state: refreshState, nextAt: nextAt.map(wallClock), held: heldSince != nil,
                inFlight: attempt != nil, consecutiveFailures: consecutiveFailures, lastError: lastError,
                pendingRequests: waiters.count),
            token: token.map { token in
                .init(
                    fingerprint: token.fingerprint, fetchedAt: token.fetchedAt, age: token.age(at: now),
                    stale: !isFresh(token))
            },
            counters: counters,
            backgroundRefreshEnabled: configuration.backgroundRefreshEnabled)
    }
}
