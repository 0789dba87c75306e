import ServiceLifecycle
import WAFTokenCore

/// Passes the provider's events on: to the `/v1/events` streams, the metrics and the service
/// manager's status line.
struct ProviderEventsService: Service {
    let events: AsyncStream<WAFProviderEvent>
    let broadcaster: EventBroadcaster
    let metrics: DaemonMetrics
    let status: StatusReporter

    func run() async {
        status.report()
        for await event in events.cancelOnGracefulShutdown() {
            broadcaster.publish(event)
            switch event {
            case .tokenUpdated(_, .fetched): metrics.countFetch(success: true)
            case .refreshFailed: metrics.countFetch(success: false)
            default: break
            }
            status.report()
        }
    }
}
