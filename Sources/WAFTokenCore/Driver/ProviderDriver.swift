import Logging
import NIOConcurrencyHelpers
import Synchronization

/// Performs what the `ProviderMachine` decides: starts and cancels fetches, arms and cancels
/// timers, answers callers, tells observers. Every method runs on the scheduler's state context,
/// which is what makes the unchecked `Sendable` sound.
///
/// Timers and fetches hold the driver weakly: a provider its owner dropped stops (its `deinit`
/// sends `stop`), and nothing it armed can keep it alive or running.
final class ProviderDriver: @unchecked Sendable {
    enum Waiting {
        case result(WAFTokenResultCallback)
        case onDemand(@Sendable (WAFToken?) -> Void)
    }

    struct Observer {
        let yield: @Sendable (WAFProviderEvent) -> Void
        let finish: @Sendable () -> Void
    }

    let scheduler: any WAFScheduler
    let cookieManager: WAFCookieManager
    let published: NIOLockedValueBox<ProviderSnapshot>
    /// How many snapshots were published: counted after each is in place, so that a reader that
    /// read this number, then the snapshot, holds one at least as new as the number says.
    let publications = Synchronization.Atomic<UInt64>(0)
    private let fetcher: any WAFTokenFetcher
    private let randomUnit: @Sendable () -> Double
    private let persist: (@Sendable (WAFTokenRecord) -> Void)?
    private let snapshotChanged: (@Sendable () -> Void)?
    private let logger: Logger
    private var machine: ProviderMachine
    private var timers: [ProviderMachine.ID: WAFCancellable] = [:]
    private var fetches: [ProviderMachine.ID: WAFCancellable] = [:]
    private var waiting: [ProviderMachine.WaiterID: Waiting] = [:]
    private var lastWaiterID: UInt64 = 0
    private var observers: [UInt64: Observer] = [:]

    init(settings: ProviderMachine.Settings, fetcher: any WAFTokenFetcher, scheduler: any WAFScheduler, options: WAFTokenProviderOptions) {
        machine = ProviderMachine(settings: settings, lifecycle: options.lifecycle)
        self.fetcher = fetcher
        self.scheduler = scheduler
        randomUnit = options.randomUnit
        persist = options.persist
        snapshotChanged = options.snapshotChanged
        logger = options.logger
        cookieManager = WAFCookieManager(settings: .init(configuration: settings.configuration, secure: settings.cookieSecure))
        published = NIOLockedValueBox(machine.snapshot)
    }

    // MARK: Feeding the machine

    func send(_ event: ProviderMachine.Event) {
        let clock = ProviderMachine.Clock(monotonic: scheduler.now, wall: scheduler.wallClockNow, randomUnit: randomUnit())
        for action in machine.handle(event, at: clock) { perform(action) }
    }

    func request(_ request: ProviderMachine.Request, _ callback: Waiting) {
        lastWaiterID &+= 1
        self.request(request, callback, id: ProviderMachine.WaiterID(lastWaiterID))
    }

    /// A request whose id the caller chose (`WAFTokenWait`), from the ids above the driver's own.
    func request(_ request: ProviderMachine.Request, _ callback: Waiting, id: ProviderMachine.WaiterID) {
        waiting[id] = callback
        send(.request(id, request))
    }

    /// The caller of `id` stopped waiting: its callback goes now, never called.
    func withdraw(_ id: ProviderMachine.WaiterID) {
        guard waiting.removeValue(forKey: id) != nil else { return }
        send(.withdraw(id))
    }

    func status() -> WAFProviderStatus {
        machine.status(at: ProviderMachine.Clock(monotonic: scheduler.now, wall: scheduler.wallClockNow, randomUnit: 1))
    }

    var lifecycle: WAFLifecycleState { machine.lifecycleState }

    // MARK: Observers

    func addObserver(id: UInt64, _ observer: Observer) {
        if published.withLockedValue({ $0.stopped }) {
            observer.finish()
        } else {
            observers[id] = observer
        }
    }

    func removeObserver(id: UInt64) {
        observers[id] = nil
    }

    func finishObservers() {
        let finished = observers
        observers = [:]
        for observer in finished.values { observer.finish() }
    }

    // MARK: Performing actions

    private func perform(_ action: ProviderMachine.Action) {
        switch action {
        case .startFetch(let id, let request):
            logger.debug("token fetch started", metadata: ["fetch": "\(id)"])
            fetches[id] = scheduler.spawn { [fetcher, scheduler, weak self] in
                let result: Result<String, SdkError>
                do throws(SdkError) {
                    result = .success(try await fetcher.fetchToken(request))
                } catch {
                    result = .failure(error)
                }
                scheduler.execute { [weak self] in self?.fetchEnded(id, result) }
            }
        case .cancelFetch(let id):
            fetches.removeValue(forKey: id)?.cancel()
        case .armTimer(let id, let instant):
            timers[id] = scheduler.schedule(after: max(.zero, instant - scheduler.now)) { [weak self] in
                self?.timerFired(id)
            }
        case .cancelTimer(let id):
            timers.removeValue(forKey: id)?.cancel()
        case .answer(let id, let answer):
            deliver(answer, to: waiting.removeValue(forKey: id))
        case .announce(let event):
            log(event)
            for observer in observers.values { observer.yield(event) }
        case .persist(let record):
            persist?(record)
        case .publish(let snapshot):
            published.withLockedValue { $0 = snapshot }
            publications.add(1, ordering: .releasing)
            cookieManager.update(
                settings: .init(configuration: snapshot.configuration, secure: snapshot.settings.cookieSecure), token: snapshot.token)
            snapshotChanged?()
        }
    }

    private func fetchEnded(_ id: ProviderMachine.ID, _ result: Result<String, SdkError>) {
        fetches[id] = nil
        send(.fetchEnded(id, result))
    }

    private func timerFired(_ id: ProviderMachine.ID) {
        timers[id] = nil
        send(.timerFired(id))
    }

    private func deliver(_ answer: ProviderMachine.Answer, to callback: Waiting?) {
        switch (callback, answer) {
        case (.result(let callback)?, .token(let token)): scheduler.deliver { callback(token, nil) }
        case (.result(let callback)?, .failure(let error)): scheduler.deliver { callback(nil, error) }
        case (.onDemand(let completion)?, .onDemand(let token)): scheduler.deliver { completion(token) }
        default: preconditionFailure("an answer of the wrong kind, or for nobody: \(answer)")
        }
    }

    private func log(_ event: WAFProviderEvent) {
        switch event {
        case .tokenUpdated(let token, let origin):
            logger.info("token \(origin == .fetched ? "fetched" : "loaded")", metadata: ["token.fingerprint": "\(token.fingerprint)"])
        case .tokenDropped:
            logger.notice("token dropped: the web ACL or the domain changed")
        case .refreshFailed(let error, let failures, let next):
            logger.warning(
                "token fetch failed",
                metadata: [
                    "error": "\(error.name)", "reason": "\(error.description)", "consecutive_failures": "\(failures)",
                    "next_attempt_at": "\(next.map { "\($0)" } ?? "none")",
                ])
        case .lifecycleChanged(let lifecycle):
            logger.info(
                "lifecycle changed",
                metadata: ["state": "\(lifecycle.state.rawValue)", "active": "\(lifecycle.active)", "paused": "\(lifecycle.paused)"])
        case .refreshHeld:
            logger.debug("refresh held while the app is inactive")
        case .callbackFailed(let description):
            logger.error("Exception occurred in customer implementation of tokenResultCallback: \(description)")
        }
    }
}
