import Dispatch
import Logging
import ServiceLifecycle
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// SIGUSR1 (foreground), SIGUSR2 (background; again: closed) and SIGHUP (reload), through
/// `DispatchSourceSignal`s on a queue of their own.
struct SignalService: Service {
    /// Signals the daemon handles itself. Their default action kills the process, so they are
    /// ignored as the very first thing the daemon does, before any can arrive unhandled.
    static let handled: [Int32] = [SIGUSR1, SIGUSR2, SIGHUP]

    let provider: WAFTokenProvider
    let reloader: Reloader
    let metrics: DaemonMetrics
    let logger: Logger

    static func ignoreDefaultActions() {
        for signal in handled { Glibc.signal(signal, SIG_IGN) }
    }

    func run() async {
        let queue = DispatchQueue(label: "waf-tokend.signals")
        var sources: [any DispatchSourceSignal] = []
        for signal in Self.handled {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { [self] in
                // Signals that arrive together are delivered once, with their count.
                let count = Int(source.data)
                switch signal {
                case SIGUSR1: lifecycle(foreground: true, count: count, name: "SIGUSR1")
                case SIGUSR2: lifecycle(foreground: false, count: count, name: "SIGUSR2")
                default:
                    metrics.countSignal("SIGHUP")
                    Task { await reloader.reload() }
                }
            }
            source.resume()
            sources.append(source)
        }
        try? await gracefulShutdown()
        for source in sources { source.cancel() }
    }

    /// A SIGUSR2 in the background means closed; several coalesced into one event count as several.
    private func lifecycle(foreground: Bool, count: Int, name: String) {
        metrics.countSignal(name)
        let logger = logger
        provider.updateLifecycle({ state in
            if foreground { return .foreground }
            var state = state
            for _ in 0..<min(count, 2) { state = state == .foreground ? .background : .closed }
            return state
        }) { lifecycle in
            logger.info("lifecycle signal", metadata: ["signal": "\(name)", "state": "\(lifecycle.state.rawValue)"])
        }
    }
}
