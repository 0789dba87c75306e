/// Which endpoints a listener of the API serves.
package enum APIRole: Sendable {
    /// The Unix socket: every endpoint.
    case socket
    /// `metrics.listen`: `/metrics`, `/healthz` and `/readyz` only, never a token, and the
    /// operator's view of them (every provider by name, no peer to check: a TCP listener on any
    /// interface, for Prometheus and a kubelet's probes).
    case probes
    /// `auth.listen`: `GET /v1/auth` (forward authentication) and `/healthz` only.
    case auth

    /// Whether this listener serves `path`.
    func serves(_ path: String) -> Bool {
        switch self {
        case .socket: true
        case .probes: path == "/metrics" || path == "/healthz" || path == "/readyz"
        case .auth: path == "/v1/auth" || path == "/healthz"
        }
    }

    /// For the log and the refusal metrics.
    var listenerName: String {
        switch self {
        case .socket: "socket"
        case .probes: "metrics listener"
        case .auth: "auth listener"
        }
    }
}
