import Logging
import ServiceLifecycle
import WAFSocketAPI

/// Serves until the graceful stop begins, then stops accepting and drains (docs/running.md: finish
/// requests in flight, bounded, notify STOPPING).
struct SocketServerService: Service {
    static let grace = Duration.seconds(5)

    let listeners: APIListeners
    let broadcaster: EventBroadcaster
    let notifier: any ServiceNotifier
    let logger: Logger

    func run() async {
        try? await gracefulShutdown()
        logger.info("stopping")
        notifier.stopping()
        broadcaster.finishAll()
        await listeners.stop(grace: Self.grace)
    }
}
