import Dispatch
import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// OBJ-4: the result of `onTokenReady`; exactly one of token and error is non-nil.
public typealias WAFTokenResultCallback = @Sendable (WAFToken?, SdkError?) -> Void

/// A result callback that may throw; what it throws is logged and reported, and the provider goes
/// on (TOK-6).
public typealias WAFThrowingTokenResultCallback = @Sendable (WAFToken?, SdkError?) throws -> Void

/// The AWS WAF token provider (OBJ-3), with the behaviour of PROVIDER-RULES.md.
///
/// State lives on the scheduler's serial state context. `getToken()` with background refresh reads
/// a published snapshot and never waits for that context, so the hot path costs one lock.
public final class WAFTokenProvider: Sendable {
    /// The SDK's cookie manager for this provider's token (COOK-1…4).
    public let cookieManager: WAFCookieManager
    private let machine: ProviderMachine
    private let scheduler: any WAFScheduler
    private let observerIDs = NIOLockedValueBox<UInt64>(0)

    /// Builds the provider and starts it: with background refresh, the first fetch begins at once
    /// (TOK-1).
    public init(
        configuration: WAFConfiguration,
        client: any WAFTokenServiceClient,
        scheduler: any WAFScheduler = DispatchScheduler(),
        options: WAFTokenProviderOptions = WAFTokenProviderOptions()
    ) {
        self.scheduler = scheduler
        machine = ProviderMachine(configuration: configuration, client: client, scheduler: scheduler, options: options)
        cookieManager = machine.cookieManager
        scheduler.execute { [machine] in machine.start(restoredToken: options.restoredToken) }
    }

    /// The configuration in force (it changes only through `reconfigure`).
    public var configuration: WAFConfiguration { machine.published.withLockedValue { $0.configuration } }

    // MARK: The SDK's calls

    /// TOK-1: with background refresh, the cached token (nil before the first one), no I/O.
    /// TOK-2: without, a blocking fetch of a new token; after `maxRetryCount` retries the previous
    /// token or nil (RET-4). Use `token()` from async code.
    public func getToken() -> WAFToken? {
        let published = machine.published.withLockedValue { $0 }
        guard !published.configuration.backgroundRefreshEnabled, !published.isShutDown else {
            return published.token
        }
        let done = DispatchSemaphore(value: 0)
        let result = NIOLockedValueBox<WAFToken?>(nil)
        getToken { token in
            result.withLockedValue { $0 = token }
            done.signal()
        }
        done.wait()
        return result.withLockedValue { $0 }
    }

    /// `getToken()` without blocking: the completion runs on a background thread.
    public func getToken(completion: @escaping @Sendable (WAFToken?) -> Void) {
        let published = machine.published.withLockedValue { $0 }
        if published.configuration.backgroundRefreshEnabled {
            scheduler.deliver { completion(published.token) }
            return
        }
        scheduler.execute { [machine] in machine.requestOnDemand(completion) }
    }

    /// `getToken()` for async code.
    public func token() async -> WAFToken? {
        await withCheckedContinuation { continuation in
            getToken { continuation.resume(returning: $0) }
        }
    }

    /// TOK-3: the callback gets an active token on a background thread, at once if the cached one
    /// is fresh; or `allRetriesFailed` after `maxRetryCount` retries (RET-3).
    public func onTokenReady(_ callback: @escaping WAFTokenResultCallback) {
        scheduler.execute { [machine] in machine.requestReady(force: false, callback) }
    }

    /// `onTokenReady` with a callback that may throw: the error is logged as the SDK does
    /// ("Exception occurred in customer implementation of tokenResultCallback") and reported as a
    /// `callbackFailed` event (TOK-6).
    public func onTokenReady(_ callback: @escaping WAFThrowingTokenResultCallback) {
        onTokenReady(containing(callback))
    }

    /// `onTokenReady` for async code.
    public func tokenReady() async throws(SdkError) -> WAFToken {
        try await awaitResult { self.onTokenReady($0) }
    }

    /// RET-8: get a new token now even if the cached one is fresh ("this token was refused"),
    /// joining a fetch in flight; answered like `onTokenReady`. The cached token stays meanwhile.
    public func refreshToken(_ callback: @escaping WAFTokenResultCallback) {
        scheduler.execute { [machine] in machine.requestReady(force: true, callback) }
    }

    /// `refreshToken` for async code.
    public func refreshToken() async throws(SdkError) -> WAFToken {
        try await awaitResult { self.refreshToken($0) }
    }

    /// Seeds the cache with a token obtained elsewhere (OBJ-3), fetched at `fetchedAt`.
    public func loadTokenIntoProvider(_ value: String, fetchedAt: Date? = nil) {
        let fetchedAt = fetchedAt ?? scheduler.wallClockNow
        scheduler.execute { [machine] in machine.load(value: value, fetchedAt: fetchedAt) }
    }

    /// Writes `token`'s cookie to the cookie manager (a no-op with `setTokenCookie` false).
    public func storeTokenInCookieStorage(_ token: WAFToken) {
        cookieManager.store(token)
    }

    // MARK: What the daemon needs

    /// The cached token with its age and staleness, read without the state queue.
    public func cachedToken() -> (token: WAFToken, age: Duration, stale: Bool)? {
        let published = machine.published.withLockedValue { $0 }
        guard let token = published.token else { return nil }
        let age = token.age(at: scheduler.now)
        return (token, age, published.paused || age >= published.configuration.tokenRefreshDelay)
    }

    /// The app moved to `state` (LIFE rules). `completion` runs once the change is applied.
    public func setLifecycle(_ state: WAFLifecycleState, completion: (@Sendable () -> Void)? = nil) {
        scheduler.execute { [machine] in
            machine.setLifecycle(state)
            completion?()
        }
    }

    /// Moves the app to the state `transform` picks from the current one, in one step, so that
    /// relative changes ("background; if already there, closed") stay right under any concurrency.
    public func updateLifecycle(
        _ transform: @escaping @Sendable (WAFLifecycleState) -> WAFLifecycleState,
        completion: (@Sendable (WAFProviderStatus.Lifecycle) -> Void)? = nil
    ) {
        scheduler.execute { [machine] in
            let lifecycle = machine.updateLifecycle(transform)
            completion?(lifecycle)
        }
    }

    /// A consistent snapshot, taken on the state queue.
    public func status() -> WAFProviderStatus {
        scheduler.executeAndWait { [machine] in machine.status() }
    }

    /// A consistent snapshot, delivered from the state queue without blocking the caller.
    public func status(_ completion: @escaping @Sendable (WAFProviderStatus) -> Void) {
        scheduler.execute { [machine] in completion(machine.status()) }
    }

    /// Runs `completion` after a round trip through the state queue: the watchdog's proof that the
    /// provider still answers.
    public func ping(_ completion: @escaping @Sendable () -> Void) {
        scheduler.execute(completion)
    }

    /// For tests only: blocks the state queue for good, as a wedged provider would, so that a test
    /// can prove that the watchdog then stops. The daemon calls it only under a debug switch.
    public func _wedgeStateQueueForTesting() {
        scheduler.execute { DispatchSemaphore(value: 0).wait() }
    }

    /// Events from now on, in order. Changes submitted after this call are all seen.
    public func events(
        bufferingPolicy: AsyncStream<WAFProviderEvent>.Continuation.BufferingPolicy = .bufferingNewest(256)
    ) -> AsyncStream<WAFProviderEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: WAFProviderEvent.self, bufferingPolicy: bufferingPolicy)
        let id = observerIDs.withLockedValue { last in
            last += 1
            return last
        }
        let observer = ProviderMachine.Observer(
            yield: { continuation.yield($0) }, finish: { continuation.finish() })
        continuation.onTermination = { [scheduler, machine] _ in
            scheduler.execute { machine.removeObserver(id: id) }
        }
        scheduler.execute { [machine] in machine.addObserver(id: id, observer) }
        return stream
    }

    /// Applies a new configuration (the daemon's reload); see `ProviderMachine.reconfigure`.
    public func reconfigure(
        _ configuration: WAFConfiguration, lifecycleProfile: WAFLifecycleProfile, jitter: Bool, cookieSecure: Bool
    ) {
        scheduler.execute { [machine] in
            machine.reconfigure(configuration, profile: lifecycleProfile, jitter: jitter, cookieSecure: cookieSecure)
        }
    }

    /// Stops timers and the fetch in flight, answers every waiter, ends event streams. Returns once
    /// done; idempotent.
    public func shutdown() {
        scheduler.executeAndWait { [machine] in machine.shutdown() }
    }

    // MARK: Helpers

    private func containing(_ callback: @escaping WAFThrowingTokenResultCallback) -> WAFTokenResultCallback {
        { [scheduler, machine] token, error in
            do {
                try callback(token, error)
            } catch {
                scheduler.execute { machine.callbackThrew(error) }
            }
        }
    }

    private func awaitResult(
        _ start: (@escaping WAFTokenResultCallback) -> Void
    ) async throws(SdkError) -> WAFToken {
        let result: Result<WAFToken, SdkError> = await withCheckedContinuation { continuation in
            start { token, error in
                if let token {
                    continuation.resume(returning: .success(token))
                } else {
                    continuation.resume(returning: .failure(error ?? .unexpected(WAFProviderShutDownError())))
                }
            }
        }
        return try result.get()
    }
}
