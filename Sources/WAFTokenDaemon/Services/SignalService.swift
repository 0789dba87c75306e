import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFProviderRegistry
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// SIGUSR1 (foreground), SIGUSR2 (background; again: closed) for every provider (one app, one
/// lifecycle), and SIGHUP (reload), through
/// `DispatchSourceSignal`s on a queue of their own. The sources are armed, and their arming is
/// waited for, when it is made, which the runtime does before the socket serves: a signal sent as
/// soon as a client can see the daemon (its socket answers, READY=1) is handled, never dropped by
/// the ignore of `ignoreDefaultActions`.
///
/// Not swift-service-lifecycle's `UnixSignalsSequence`: it yields one element per delivery and
/// drops the source's count, and two SIGUSR2 that arrive together must mean closed, not background.
///
/// SIGTERM and SIGINT too, outside exec: armed with the others, they ask the service group to stop
/// gracefully, where the group's own `gracefulShutdownSignals` armed them one after another, each
/// a round trip through libdispatch's threads on the way to `READY=1` (docs/performance.md,
/// "Start-up in detail", "Fewer hand-offs").
final class SignalService: Service, @unchecked Sendable {
    /// Signals the daemon handles itself. Their default action kills the process, so they are
    /// ignored as the very first thing the daemon does, before any can arrive unhandled. SIGTERM
    /// and SIGINT are not: until they are armed here, their default action is the stop.
    static let handled: [Int32] = [SIGUSR1, SIGUSR2, SIGHUP]

    /// Signals that stop the daemon, outside exec.
    static let stopping: [Int32] = [SIGTERM, SIGINT]

    private let providers: ProviderSet
    private let reloader: Reloader
    private let metrics: DaemonMetrics
    private let logger: Logger
    /// What SIGTERM and SIGINT stop: the group, once `run` has one; a stop asked before is kept.
    let stop = StopRequest()
    // @unchecked: the only `var`, set once in init and read after; dispatch sources are
    // thread-safe but not marked Sendable on Linux. The rest are `let`s of Sendable types.
    private var sources: [any DispatchSourceSignal] = []

    /// `reloadsOnHangUp` and `stopsOnTerminate`: false under `waf-tokend exec`, whose child
    /// SIGHUP, SIGTERM and SIGINT are for.
    init(
        providers: ProviderSet, reloader: Reloader, metrics: DaemonMetrics, reloadsOnHangUp: Bool = true, stopsOnTerminate: Bool = true,
        logger: Logger
    ) {
        self.providers = providers
        self.reloader = reloader
        self.metrics = metrics
        self.logger = logger
        let queue = DispatchQueue(label: "waf-tokend.signals")
        // A semaphore, not a group: a source cancelled before it registered never runs its
        // handler, and a group dropped while entered traps.
        let registered = DispatchSemaphore(value: 0)
        let armed = Self.handled.filter { $0 != SIGHUP || reloadsOnHangUp } + (stopsOnTerminate ? Self.stopping : [])
        for signal in armed {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { [weak self, source] in
                // Signals that arrive together are delivered once, with their count. (The source and
                // its handler hold each other until cancelled, in run() or deinit.)
                self?.received(signal, count: Int(source.data))
            }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            sources.append(source)
        }
        // `resume` arms a source later, on libdispatch's manager thread; until then the signal is
        // ignored and lost. Wait for it (the queue is ours and idle, so this takes microseconds).
        let deadline = DispatchTime.now() + 5
        if !sources.indices.allSatisfy({ _ in registered.wait(timeout: deadline) == .success }) {
            logger.warning("signal handlers not armed within 5 s: a signal sent now may be lost")
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }

    static func ignoreDefaultActions() {
        for signal in handled { Glibc.signal(signal, SIG_IGN) }
    }

    func run() async {
        try? await gracefulShutdown()
        // SIGTERM's and SIGINT's stay armed until the end (deinit): one sent again while the
        // others stop changes nothing, as under the group's own handlers.
        for source in sources where !Self.stopping.contains(Int32(source.handle)) { source.cancel() }
    }

    private func received(_ signal: Int32, count: Int) {
        switch signal {
        case SIGTERM, SIGINT:
            logger.debug("stop signal", metadata: ["signal": "\(signal == SIGTERM ? "SIGTERM" : "SIGINT")"])
            stop.request()
        case SIGUSR1: lifecycle(foreground: true, count: count, name: "SIGUSR1")
        case SIGUSR2: lifecycle(foreground: false, count: count, name: "SIGUSR2")
        default:
            metrics.countSignal("SIGHUP")
            Task { [reloader] in await reloader.reload() }
        }
    }

    /// A SIGUSR2 in the background means closed; several coalesced into one event count as several.
    private func lifecycle(foreground: Bool, count: Int, name: String) {
        metrics.countSignal(name)
        let logger = logger
        let entries = providers.all
        let moved = Countdown<WAFProviderStatus.Lifecycle>(entries.count) { lifecycle in
            logger.info("lifecycle signal", metadata: ["signal": "\(name)", "state": "\(lifecycle.state.rawValue)"])
        }
        for entry in entries {
            entry.provider.updateLifecycle({ state in
                if foreground { return .foreground }
                var state = state
                for _ in 0..<min(count, 2) { state = state == .foreground ? .background : .closed }
                return state
            }) { moved.arrived($0) }
        }
    }
}

/// The group SIGTERM and SIGINT stop gracefully, once there is one; a stop asked before it is
/// kept and told to it when it comes. The group keeps one asked before it runs from
/// swift-service-lifecycle 2.13.0 on, which Package.swift asks for (earlier, `run` then threw).
final class StopRequest: Sendable {
    private let state = NIOLockedValueBox<(group: ServiceGroup?, asked: Bool)>((nil, false))

    func request() {
        let group = state.withLockedValue { state -> ServiceGroup? in
            state.asked = true
            return state.group
        }
        if let group { Task { await group.triggerGracefulShutdown() } }
    }

    /// Runs `body` unless a stop was asked, under the lock a stop is asked under: what it sends
    /// goes out before anything the stop sends. Whether it ran.
    func unlessAsked(_ body: () -> Void) -> Bool {
        state.withLockedValue { state in
            guard !state.asked else { return false }
            body()
            return true
        }
    }

    func attach(_ group: ServiceGroup) {
        let asked = state.withLockedValue { state -> Bool in
            state.group = group
            return state.asked
        }
        if asked { Task { await group.triggerGracefulShutdown() } }
    }
}
