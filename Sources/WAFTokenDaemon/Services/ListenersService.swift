import Logging
import ServiceLifecycle
import WAFServiceManager
import WAFSocketAPI
import WAFTokenProxy

/// Every listener's part in the daemon's life: the socket API's and the proxies'. On the graceful
/// stop they all stop accepting at once and drain together (docs/systemd.md, "Restarts that
/// consumers do not see"): one after another, a proxy's clients would wait out the socket's drain,
/// and a restart would last the sum of them.
struct ListenersService: Service {
    static let grace = Duration.seconds(5)
    /// How long the stop waits for a reload under way: with the drain and the providers' 5 s
    /// each, the whole stop stays within the unit's TimeoutStopSec=15.
    static let reloadWait = Duration.seconds(2)

    let listeners: APIListeners
    let proxies: ProxyControllers
    let reloader: Reloader
    let broadcaster: EventBroadcaster
    let notifier: any ServiceNotifier
    let logger: Logger

    func run() async {
        try? await gracefulShutdown()
        logger.info("stopping")
        // No reload starts proxies or providers behind the stop: the one under way ends first,
        // unless a wedged provider holds it.
        if await !reloader.close(within: Self.reloadWait) {
            logger.warning("a reload did not end within \(Self.reloadWait); stopping without waiting for it")
        }
        notifier.stopping()
        broadcaster.finishAll()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await listeners.stop(grace: Self.grace) }
            group.addTask { await proxies.stopAll() }
        }
    }
}
