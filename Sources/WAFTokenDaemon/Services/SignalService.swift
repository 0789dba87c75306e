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
/// `DispatchSourceSignal`s on a queue of their own (`SignalArming`, armed as the start begins).
/// Their arming is waited for when this is made, which the runtime does before the socket serves:
/// a signal sent as soon as a client can see the daemon (its socket answers, READY=1) is handled,
/// never dropped by the ignore of `ignoreDefaultActions`.
///
/// Not swift-service-lifecycle's `UnixSignalsSequence`: it yields one element per delivery and
/// drops the source's count, and two SIGUSR2 that arrive together must mean closed, not background.
///
/// SIGTERM and SIGINT too, outside exec: armed with the others, they ask the service group to stop
/// gracefully, where the group's own `gracefulShutdownSignals` armed them one after another, each
/// a round trip through libdispatch's threads on the way to `READY=1` (docs/performance.md,
/// "Start-up in detail", "Fewer hand-offs to `READY=1`").
final class SignalService: Service, @unchecked Sendable {
    /// Signals the daemon handles itself. Their default action kills the process, so they are
    /// ignored as the very first thing the daemon does, before any can arrive unhandled. SIGTERM
    /// and SIGINT are not: until they are armed, their default action is the stop.
    static let handled: [Int32] = [SIGUSR1, SIGUSR2, SIGHUP]

    /// Signals that stop the daemon, outside exec.
    static let stopping: [Int32] = [SIGTERM, SIGINT]

    private let providers: ProviderSet
    private let reloader: Reloader
    private let metrics: DaemonMetrics
    private let logger: Logger
    private let arming: SignalArming
    /// What SIGTERM and SIGINT stop (the arming's).
    var stop: StopRequest { arming.stop }

    /// `arming`: the sources, armed as the start began; bound here and waited for, so that a
    /// signal sent from the moment the socket accepts is handled.
    init(arming: SignalArming, providers: ProviderSet, reloader: Reloader, metrics: DaemonMetrics, logger: Logger) {
        self.arming = arming
        self.providers = providers
        self.reloader = reloader
        self.metrics = metrics
        self.logger = logger
        arming.bind { [weak self] signal, count in self?.received(signal, count: count) }
        arming.waitUntilArmed(logger: logger)
    }

    static func ignoreDefaultActions() {
        for signal in handled { Glibc.signal(signal, SIG_IGN) }
    }

    func run() async {
        try? await gracefulShutdown()
        arming.cancelAllButStop()
    }

    private func received(_ signal: Int32, count: Int) {
        switch signal {
        case SIGTERM, SIGINT:
            // Asked by the arming itself, as they arrived.
            logger.debug("stop signal", metadata: ["signal": "\(signal == SIGTERM ? "SIGTERM" : "SIGINT")"])
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
/// A second one before there is a group (a start that hangs) is the signal's default action, as
/// a start's first signal was before its sources were armed.
final class StopRequest: Sendable {
    private let state = NIOLockedValueBox<(group: ServiceGroup?, asked: Bool)>((nil, false))
    private let defaultAction: @Sendable (Int32) -> Void

    /// `defaultAction`: a test's, in place of the end of the process.
    init(defaultAction: @escaping @Sendable (Int32) -> Void = { StopRequest.die($0) }) {
        self.defaultAction = defaultAction
    }

    /// `signal`: the one that asks (0 for none), `count` times at once.
    func request(_ signal: Int32 = 0, count: Int = 1) {
        let (group, again) = state.withLockedValue { state -> (ServiceGroup?, Bool) in
            defer { state.asked = true }
            return (state.group, state.asked || count > 1)
        }
        if let group {
            Task { await group.triggerGracefulShutdown() }
        } else if again, signal != 0 {
            defaultAction(signal)
        }
    }

    /// The signal's default action, on the thread that asks: one of libdispatch's, which block
    /// the stop signals, so the signal is unblocked here before it is raised on it.
    static func die(_ signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        _exit(128 + signal)
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
