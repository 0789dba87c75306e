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

/// The AWS WAF token provider (OBJ-3), with the behaviour of the rules in `docs/rules.md`.
///
/// Decisions are `ProviderMachine`'s; a driver performs them on the scheduler's serial state
/// context. `getToken()` with background refresh reads a published snapshot and never waits for
/// that context, so the hot path costs one lock. Dropping the last reference stops the provider.
public final class WAFTokenProvider: Sendable {
    /// The SDK's cookie manager for this provider's token (COOK-1…4).
    public let cookieManager: WAFCookieManager
    private let driver: ProviderDriver
    private let scheduler: any WAFScheduler
    private let observerIDs = NIOLockedValueBox<UInt64>(0)
    /// Ids of waits a caller may withdraw: above the driver's own (the top bit set).
    private let waitIDs = NIOLockedValueBox<UInt64>(0)

    /// Builds the provider and starts it: with background refresh, the first fetch begins at once
    /// (TOK-1).
    public init(
        configuration: WAFConfiguration,
        fetcher: any WAFTokenFetcher,
        scheduler: any WAFScheduler = DispatchScheduler(),
        options: WAFTokenProviderOptions = WAFTokenProviderOptions()
    ) {
        self.scheduler = scheduler
        let settings = ProviderMachine.Settings(
            configuration: configuration, profile: options.lifecycleProfile, jitter: options.jitter, cookieSecure: options.cookieSecure)
        driver = ProviderDriver(settings: settings, fetcher: fetcher, scheduler: scheduler, options: options)
        cookieManager = driver.cookieManager
        scheduler.execute { [driver] in driver.send(.start(restored: options.restoredToken)) }
    }

    deinit {
        scheduler.execute { [driver] in
            driver.send(.stop)
            driver.finishObservers()
        }
    }

    /// The configuration in force (it changes only through `reconfigure`).
    public var configuration: WAFConfiguration { snapshot.configuration }

    private var snapshot: ProviderSnapshot { driver.published.withLockedValue { $0 } }

    // MARK: The SDK's calls

    /// TOK-1: with background refresh, the cached token (nil before the first one), no I/O.
    /// TOK-2: without, a blocking fetch of a new token; after `maxRetryCount` retries the previous
    /// token or nil (RET-4). Never call it on the provider's own scheduler; use `token()` from
    /// async code.
    public func getToken() -> WAFToken? {
        let snapshot = snapshot
        guard !snapshot.configuration.backgroundRefreshEnabled, !snapshot.stopped else { return snapshot.token }
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
        let snapshot = snapshot
        if snapshot.configuration.backgroundRefreshEnabled {
            scheduler.deliver { completion(snapshot.token) }
            return
        }
        scheduler.execute { [driver] in driver.request(.onDemand, .onDemand(completion)) }
    }

    /// `getToken()` for async code.
    public func token() async -> WAFToken? {
        await withCheckedContinuation { continuation in
            getToken { continuation.resume(returning: $0) }
        }
    }

    /// TOK-3: the callback gets an active token on a background thread, at once if the cached one
    /// is fresh; or `allRetriesFailed` after `maxRetryCount` retries (RET-3).
    @discardableResult
    public func onTokenReady(_ callback: @escaping WAFTokenResultCallback) -> WAFTokenWait {
        wait(.ready(force: false), callback)
    }

    /// `onTokenReady` with a callback that may throw: the error is logged as the SDK does
    /// ("Exception occurred in customer implementation of tokenResultCallback") and reported as a
    /// `callbackFailed` event (TOK-6).
    @discardableResult
    public func onTokenReady(_ callback: @escaping WAFThrowingTokenResultCallback) -> WAFTokenWait {
        onTokenReady(containing(callback))
    }

    /// `onTokenReady` for async code.
    public func tokenReady() async throws(SdkError) -> WAFToken {
        try await awaitResult { self.onTokenReady($0) }
    }

    /// RET-8: get a new token now even if the cached one is fresh ("this token was refused"),
    /// joining a fetch in flight; answered like `onTokenReady`. The cached token stays meanwhile.
    @discardableResult
    public func refreshToken(_ callback: @escaping WAFTokenResultCallback) -> WAFTokenWait {
        wait(.ready(force: true), callback)
    }

    /// A request whose caller may stop waiting: `cancel()` forgets the callback, which is then
    /// never called (a caller with its own deadline, so that callbacks do not pile up while
    /// fetches fail until RET-3).
    private func wait(_ request: ProviderMachine.Request, _ callback: @escaping WAFTokenResultCallback) -> WAFTokenWait {
        let id = ProviderMachine.WaiterID(
            1 << 63
                | waitIDs.withLockedValue {
                    $0 &+= 1; return $0
                })
        scheduler.execute { [driver] in driver.request(request, .result(callback), id: id) }
        // Weakly: a wait a caller keeps must not keep a stopped provider's driver alive.
        return WAFTokenWait { [scheduler, weak driver] in
            guard let driver else { return }
            scheduler.execute { driver.withdraw(id) }
        }
    }

    /// `refreshToken` for async code.
    public func refreshToken() async throws(SdkError) -> WAFToken {
        try await awaitResult { self.refreshToken($0) }
    }

    /// Seeds the cache with a token obtained elsewhere (OBJ-3), fetched at `fetchedAt` (now when
    /// nil). An untrustworthy time makes it stale at once (TOK-8).
    public func loadTokenIntoProvider(_ value: String, fetchedAt: Date? = nil) {
        scheduler.execute { [driver] in driver.send(.load(value, fetchedAt: fetchedAt)) }
    }

    /// Writes `token`'s cookie to the cookie manager (a no-op with `setTokenCookie` false).
    public func storeTokenInCookieStorage(_ token: WAFToken) {
        cookieManager.store(token)
    }

    // MARK: What the daemon needs

    /// The cached token with its age and staleness (TOK-7), read without the state context.
    public func cachedToken() -> (token: WAFToken, age: Duration, stale: Bool)? {
        snapshot.cachedToken(at: scheduler.now)
    }

    /// The cached token, only if it was fetched for `identity`: one snapshot gives both, so a
    /// token is never paired with an identity it was not fetched for, even while a reload
    /// switches the identity (the daemon's tenants, docs/rules.md TENANT-2).
    public func cachedToken(for identity: WAFTokenIdentity) -> (token: WAFToken, age: Duration, stale: Bool)? {
        let snapshot = snapshot
        guard snapshot.configuration.identity == identity else { return nil }
        return snapshot.cachedToken(at: scheduler.now)
    }

    /// The cached token if it was fetched for `identity` (as `cachedToken(for:)`), the
    /// configuration in force, from one snapshot, and the number of publications it is at least as
    /// new as. A reader on every request (the proxy) keeps what it derives from them and reads
    /// again only when `publications` has moved: an atomic load instead of a lock and a copy.
    public func published(for identity: WAFTokenIdentity) -> (publication: UInt64, token: WAFToken?, configuration: WAFConfiguration) {
        let publication = publications
        let snapshot = snapshot
        return (publication, snapshot.configuration.identity == identity ? snapshot.token : nil, snapshot.configuration)
    }

    /// How many snapshots were published so far (`published(for:)`).
    public var publications: UInt64 { driver.publications.load(ordering: .acquiring) }

    /// The app moved to `state` (LIFE rules). `completion` runs once the change is applied.
    public func setLifecycle(_ state: WAFLifecycleState, completion: (@Sendable () -> Void)? = nil) {
        updateLifecycle({ _ in state }) { _ in completion?() }
    }

    /// Moves the app to the state `transform` picks from the current one, in one step, so that
    /// relative changes ("background; if already there, closed") stay right under any concurrency.
    public func updateLifecycle(
        _ transform: @escaping @Sendable (WAFLifecycleState) -> WAFLifecycleState,
        completion: (@Sendable (WAFProviderStatus.Lifecycle) -> Void)? = nil
    ) {
        scheduler.execute { [driver] in
            driver.send(.lifecycle(transform(driver.lifecycle)))
            completion?(driver.status().lifecycle)
        }
    }

    /// A consistent snapshot, taken on the state context.
    public func status() -> WAFProviderStatus {
        scheduler.executeAndWait { [driver] in driver.status() }
    }

    /// A consistent snapshot, delivered from the state context without blocking the caller.
    public func status(_ completion: @escaping @Sendable (WAFProviderStatus) -> Void) {
        scheduler.execute { [driver] in completion(driver.status()) }
    }

    /// Runs `completion` after a round trip through the state context: the watchdog's proof that
    /// the provider still answers.
    public func ping(_ completion: @escaping @Sendable () -> Void) {
        scheduler.execute(completion)
    }

    /// Events from now on, in order. Changes submitted after this call are all seen.
    public func events(
        bufferingPolicy: AsyncStream<WAFProviderEvent>.Continuation.BufferingPolicy = .bufferingNewest(256)
    ) -> AsyncStream<WAFProviderEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: WAFProviderEvent.self, bufferingPolicy: bufferingPolicy)
        let id = observe({ continuation.yield($0) }, finished: { continuation.finish() })
        continuation.onTermination = { [weak self] _ in self?.stopObserving(id) }
        return stream
    }

    /// Calls `handler` with every event from now on, in order, on the state context (it must not
    /// block); `finished` once the provider stops. Returns the id for `stopObserving`.
    @discardableResult
    public func observe(
        _ handler: @escaping @Sendable (WAFProviderEvent) -> Void, finished: @escaping @Sendable () -> Void = {}
    ) -> UInt64 {
        let id = observerIDs.withLockedValue { last in
            last += 1
            return last
        }
        scheduler.execute { [driver] in driver.addObserver(id: id, .init(yield: handler, finish: finished)) }
        return id
    }

    public func stopObserving(_ id: UInt64) {
        scheduler.execute { [driver] in driver.removeObserver(id: id) }
    }

    /// Applies new settings (the daemon's reload; RELOAD-1…5).
    /// `applied` runs once they are in force and published: from then on no read gets a token of
    /// an identity the new settings left.
    public func reconfigure(
        _ configuration: WAFConfiguration, lifecycleProfile: WAFLifecycleProfile, jitter: Bool, cookieSecure: Bool,
        applied: (@Sendable () -> Void)? = nil
    ) {
        let settings = ProviderMachine.Settings(configuration: configuration, profile: lifecycleProfile, jitter: jitter, cookieSecure: cookieSecure)
        scheduler.execute { [driver] in
            driver.send(.reconfigure(settings))
            applied?()
        }
    }

    /// `reconfigure`, returning once the settings are in force.
    public func reconfigure(_ configuration: WAFConfiguration, lifecycleProfile: WAFLifecycleProfile, jitter: Bool, cookieSecure: Bool) async {
        await withCheckedContinuation { continuation in
            reconfigure(configuration, lifecycleProfile: lifecycleProfile, jitter: jitter, cookieSecure: cookieSecure) { continuation.resume() }
        }
    }

    /// Stops timers and the fetch in flight, answers every waiter, ends event streams. Returns once
    /// done; idempotent.
    public func shutdown() {
        scheduler.executeAndWait { [driver] in
            driver.send(.stop)
            driver.finishObservers()
        }
    }

    // MARK: Helpers

    private func containing(_ callback: @escaping WAFThrowingTokenResultCallback) -> WAFTokenResultCallback {
        let report = WeakDriver(driver)
        return { [scheduler] token, error in
            do {
                try callback(token, error)
            } catch {
                let description = String(describing: error)
                scheduler.execute { report.driver?.send(.callbackFailed(description)) }
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

/// A callback must not keep a dropped provider alive.
private struct WeakDriver: Sendable {
    weak var driver: ProviderDriver?

    init(_ driver: ProviderDriver) {
        self.driver = driver
    }
}

/// A wait for a token (`onTokenReady`, `refreshToken`) that its caller may give up.
public final class WAFTokenWait: Sendable {
    private let withdraw: @Sendable () -> Void

    package init(_ withdraw: @escaping @Sendable () -> Void) {
        self.withdraw = withdraw
    }

    /// Stops waiting: the callback is forgotten and will not be called (unless its answer is
    /// already on its way).
    public func cancel() { withdraw() }
}
