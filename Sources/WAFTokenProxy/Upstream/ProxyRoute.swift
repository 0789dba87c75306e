import CoreMetrics
import WAFDaemonTransport
import WAFProxyLoop

/// What one request reads once at its start, so that a reload never changes a request midway.
/// A class: a request reads it under a lock several times, and one reference is one retain
/// where a copy of the settings was dozens.
final class ProxyRoute: Sendable {
    let settings: ProxySettings
    let connection: ConnectionSettings
    /// For an https upstream; made once per route, not per connection.
    let tls: TLSClientContext?
    /// Pooled connections of an older route are not reused.
    let generation: Int
    /// `waf_tokend_proxy_upstream_seconds` of the route's provider and egress: a reload that
    /// changes the egress changes the series.
    let upstreamTimer: CoreMetrics.Timer
    /// `settings.upstreamTimeout` and `settings.tokenWait` on the loop's clock: a `Duration`'s
    /// conversion divides 128-bit numbers, and the stall timer moves three times a request.
    let upstreamTimeoutNanoseconds: UInt64
    let tokenWaitNanoseconds: UInt64

    init(settings: ProxySettings, connection: ConnectionSettings, tls: TLSClientContext?, generation: Int, upstreamTimer: CoreMetrics.Timer) {
        self.settings = settings
        self.connection = connection
        self.tls = tls
        self.generation = generation
        self.upstreamTimer = upstreamTimer
        upstreamTimeoutNanoseconds = settings.upstreamTimeout.loopNanoseconds
        tokenWaitNanoseconds = settings.tokenWait.loopNanoseconds
    }

    /// The metrics' `egress` label: `direct`, or the forward proxy's host and port.
    var egress: String { settings.forwardProxy?.label ?? "direct" }
}
