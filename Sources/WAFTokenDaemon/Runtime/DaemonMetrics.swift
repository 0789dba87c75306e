import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus
import WAFTokenCore

/// The daemon's metrics, through swift-metrics on a Prometheus registry of its own (no global
/// bootstrap, so that several daemons can live in one test process). No metric carries a token.
final class DaemonMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let requestCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])

    private let fetches: CoreMetrics.Counter
    private let failures: CoreMetrics.Counter
    private let tokenAge: CoreMetrics.Gauge
    private let tokenStale: CoreMetrics.Gauge
    private let tokenPresent: CoreMetrics.Gauge
    private let consecutiveFailures: CoreMetrics.Gauge
    private let lifecycleActive: CoreMetrics.Gauge
    let connections: CoreMetrics.Gauge
    let eventSubscribers: CoreMetrics.Gauge
    private let signals = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let proxyCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let proxyUpstreamTime: CoreMetrics.Timer
    private let reloads = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])

    init() {
        factory = PrometheusMetricsFactory(registry: registry)
        fetches = CoreMetrics.Counter(label: "waf_tokend_token_fetches_total", dimensions: [("result", "success")], factory: factory)
        failures = CoreMetrics.Counter(label: "waf_tokend_token_fetches_total", dimensions: [("result", "failure")], factory: factory)
        tokenAge = CoreMetrics.Gauge(label: "waf_tokend_token_age_seconds", factory: factory)
        tokenStale = CoreMetrics.Gauge(label: "waf_tokend_token_stale", factory: factory)
        tokenPresent = CoreMetrics.Gauge(label: "waf_tokend_token_present", factory: factory)
        consecutiveFailures = CoreMetrics.Gauge(label: "waf_tokend_refresh_consecutive_failures", factory: factory)
        lifecycleActive = CoreMetrics.Gauge(label: "waf_tokend_lifecycle_active", factory: factory)
        connections = CoreMetrics.Gauge(label: "waf_tokend_connections", factory: factory)
        eventSubscribers = CoreMetrics.Gauge(label: "waf_tokend_event_subscribers", factory: factory)
        proxyUpstreamTime = CoreMetrics.Timer(label: "waf_tokend_proxy_upstream_seconds", preferredDisplayUnit: .seconds, factory: factory)
    }

    func countRequests(endpoint: String, status: UInt, by count: Int = 1) {
        let key = "\(endpoint) \(status)"
        let counter = requestCounters.withLockedValue { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "waf_tokend_http_requests_total", dimensions: [("endpoint", endpoint), ("status", String(status))],
                factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment(by: count)
    }

    func countFetch(success: Bool) {
        (success ? fetches : failures).increment()
    }

    func countSignal(_ name: String) {
        counter(in: signals, label: "waf_tokend_signals_total", dimension: ("signal", name)).increment()
    }

    func countReload(success: Bool) {
        counter(in: reloads, label: "waf_tokend_reloads_total", dimension: ("result", success ? "success" : "failure")).increment()
    }

    // MARK: The proxy

    /// A proxied request's answer to its client, by class: `2xx`, `5xx`.
    func countProxyRequest(status: UInt) {
        counter(in: proxyCounters, label: "waf_tokend_proxy_requests_total", dimension: ("class", "\(status / 100)xx")).increment()
    }

    /// `challenge` (an upstream's 202 challenge seen), `replay` (a request sent once more),
    /// `unreachable`, `timeout`, `closed` (upstream failures).
    func countProxyEvent(_ event: String) {
        counter(in: proxyCounters, label: "waf_tokend_proxy_events_total", dimension: ("event", event)).increment()
    }

    /// From the request's last byte sent upstream to the answer's head.
    func recordUpstreamLatency(nanoseconds: Int64) {
        proxyUpstreamTime.recordNanoseconds(nanoseconds)
    }

    /// The Prometheus text exposition, with the gauges read fresh from `status`.
    func exposition(status: WAFProviderStatus) -> [UInt8] {
        tokenPresent.record(status.token == nil ? 0 : 1)
        tokenAge.record(status.token?.age.seconds ?? 0)
        tokenStale.record(status.token?.stale == false ? 0 : 1)
        consecutiveFailures.record(status.refresh.consecutiveFailures)
        lifecycleActive.record(status.lifecycle.active ? 1 : 0)
        return registry.emitToBuffer()
    }

    private func counter(in cache: NIOLockedValueBox<[String: CoreMetrics.Counter]>, label: String, dimension: (String, String)) -> CoreMetrics.Counter {
        cache.withLockedValue { counters in
            let key = "\(label) \(dimension.1)"
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(label: label, dimensions: [dimension], factory: factory)
            counters[key] = counter
            return counter
        }
    }
}
