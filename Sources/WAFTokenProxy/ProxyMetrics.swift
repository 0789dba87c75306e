import CoreMetrics
import WAFDaemonTransport

/// What the proxy reports to the daemon's metrics: the daemon's registry implements it.
package protocol ProxyMetrics: RequestCounting {
    /// The proxy's request counters of `provider` by status class (index 0 for 1xx … 4 for 5xx),
    /// for a proxy to keep: looking one up costs a lock and a string key, each request.
    func proxyRequestCounters(provider: String) -> [CoreMetrics.Counter]
    /// `challenge` (an upstream's 202 challenge seen), `replay` (a request sent once more),
    /// `unreachable`, `timeout`, `closed` (upstream failures).
    func countProxyEvent(provider: String, _ event: String)
    /// The proxy's upstream timer of `provider` through `egress` (from the request's last byte
    /// sent upstream to the answer's head), for a proxy's route to keep.
    func upstreamTimer(provider: String, egress: String) -> CoreMetrics.Timer
    /// The upstream challenged the token the canary saw accepted last: evidence that the web ACL
    /// no longer accepts it (docs/canary.md).
    func challengedAcceptedToken(provider: String)
    /// The upstream asked for a CAPTCHA, which no token solves.
    func metCaptcha(provider: String)
}

/// Why a proxy cannot start or take a reload's settings.
package enum ProxyFailure: Error, Sendable, CustomStringConvertible {
    /// Its listener cannot be bound (the daemon exits 71 at start).
    case listener(ListenerFailure)
    /// Its settings cannot be used (78): TLS to the upstream cannot be set up.
    case settings(String)

    package var description: String {
        switch self {
        case .listener(let failure): failure.message
        case .settings(let message): message
        }
    }
}
