import ServiceLifecycle
import WAFProviderRegistry
import WAFServiceManager
import WAFTokenCore

/// Tells the service manager the daemon is ready: once the socket listens, or, with
/// `readiness.waitForToken`, once every provider has cached its first fresh token, extending the
/// start timeout meanwhile.
struct ReadinessService: Service {
    /// Each extension asks for this much more time, and is renewed well before it runs out.
    static let extensionStep = Duration.seconds(30)
    static let renewEvery = Duration.seconds(10)

    let providers: ProviderSet
    let notifier: any ServiceNotifier
    let waitForToken: Bool
    let status: StatusReporter
    /// A stop asked for (SIGTERM, SIGINT) before `READY=1` goes out: none then, for the group may
    /// already have told systemd `STOPPING=1` (a SIGTERM sent the moment the socket accepted is
    /// asked before the group runs, and the group tells every service to stop at once).
    let stop: StopRequest
    /// The reloader: its reloads held during the start let go as this runs (the start done), and
    /// told to announce themselves once `READY=1` is out.
    let reloads: any ReloadGate

    func run() async {
        // Not where a stop was asked: a reload then would only hold the stop up (`Reloader.close`).
        _ = stop.unlessAsked { reloads.release() }
        if waitForToken {
            let clock = ContinuousClock()
            var renewAt = clock.now
            while providers.all.contains(where: { $0.provider.cachedToken()?.stale != false }) {
                if clock.now >= renewAt {
                    notifier.extendTimeout(by: Self.extensionStep)
                    notifier.status("waiting for the first token")
                    renewAt = clock.now + Self.renewEvery
                }
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(250)) }
                } catch {
                    return
                }
            }
        }
        // Not returned early: a service that ends before it is told to stop cancels the group.
        // Where the group stops for another reason (exec's child ended), its graceful shutdown.
        if !Task.isShuttingDownGracefully,
            stop.unlessAsked({
                notifier.ready(); reloads.announce()
            })
        {
            status.report()
        }
        try? await gracefulShutdown()
    }
}
