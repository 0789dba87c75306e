import Dispatch
import ServiceLifecycle
import WAFServiceManager

/// Pings the service manager's watchdog at its interval, each ping only after the liveness probe
/// (a round trip through the provider's state context) came back: if the provider wedges, the
/// pings stop and systemd restarts the daemon.
struct WatchdogService: Service {
    let notifier: any ServiceNotifier
    let probe: DaemonIntegration.LivenessProbe

    func run() async {
        guard let interval = notifier.watchdogInterval else {
            try? await gracefulShutdown()
            return
        }
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "waf-tokend.watchdog"))
        let (seconds, attoseconds) = interval.components
        timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
        timer.setEventHandler { [notifier, probe] in probe { notifier.watchdogPing() } }
        timer.resume()
        try? await gracefulShutdown()
        timer.cancel()
    }
}
