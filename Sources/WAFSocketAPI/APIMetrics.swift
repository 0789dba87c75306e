import WAFDaemonTransport
import WAFTokenCore

/// What the socket API reports to the daemon's metrics, and how `/metrics` gets its text: the
/// daemon's registry implements it, the API knows no registry.
package protocol APIMetrics: RequestCounting {
    /// The socket's open connections changed.
    func connectionsChanged(_ count: Int)
    /// The number of `/v1/events` streams changed.
    func eventSubscribersChanged(_ count: Int)
    /// The Prometheus text exposition, with each provider's gauges from its status.
    func exposition(statuses: [(provider: String, status: WAFProviderStatus)]) -> [UInt8]
}
