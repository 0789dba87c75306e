import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus
import WAFProviderRegistry
import WAFSocketAPI
import WAFTokenCore
import WAFTokenProxy

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The daemon's metrics, through swift-metrics on a Prometheus registry of its own (no global
/// bootstrap, so that several daemons can live in one test process). No metric carries a token;
/// every provider metric carries a `provider` label (MULTI-5).
final class DaemonMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let requestCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])

    /// One provider's gauges, read from its status.
    private struct ProviderMetrics: Sendable {
        let tokenAge: CoreMetrics.Gauge
        let tokenStale: CoreMetrics.Gauge
        let tokenPresent: CoreMetrics.Gauge
        let consecutiveFailures: CoreMetrics.Gauge
        let lifecycleActive: CoreMetrics.Gauge

        init(_ name: String, factory: PrometheusMetricsFactory) {
            let label = [("provider", name)]
            tokenAge = CoreMetrics.Gauge(label: "waf_tokend_token_age_seconds", dimensions: label, factory: factory)
            tokenStale = CoreMetrics.Gauge(label: "waf_tokend_token_stale", dimensions: label, factory: factory)
            tokenPresent = CoreMetrics.Gauge(label: "waf_tokend_token_present", dimensions: label, factory: factory)
            consecutiveFailures = CoreMetrics.Gauge(label: "waf_tokend_refresh_consecutive_failures", dimensions: label, factory: factory)
            lifecycleActive = CoreMetrics.Gauge(label: "waf_tokend_lifecycle_active", dimensions: label, factory: factory)
        }

        func destroy() {
            for gauge in [tokenAge, tokenStale, tokenPresent, consecutiveFailures, lifecycleActive] { gauge.destroy() }
        }
    }

    private let providers = NIOLockedValueBox<[String: ProviderMetrics]>([:])
    let connections: CoreMetrics.Gauge
    let eventSubscribers: CoreMetrics.Gauge
    /// Token files, jars and state files whose last write failed (retried until it succeeds).
    let sinkWritesFailing: CoreMetrics.Gauge
    private let fetchCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let signals = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let proxyCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    /// Outside the registry: the proxy records one per request (`UpstreamTimes`).
    private let proxyUpstreamTimes = NIOLockedValueBox<[String: UpstreamTimes]>([:])
    private let reloads = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let forcedRefreshes = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let hookRuns = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    private let canaryCounters = NIOLockedValueBox<[String: CoreMetrics.Counter]>([:])
    /// Where the proxy's evidence goes: the canaries, which the runtime sets once made.
    let canaryEvidence = NIOLockedValueBox<(@Sendable (String) -> Void)?>(nil)
    private let canaryAcceptedAt = NIOLockedValueBox<[String: CoreMetrics.Gauge]>([:])

    init() {
        factory = PrometheusMetricsFactory(registry: registry)
        connections = CoreMetrics.Gauge(label: "waf_tokend_connections", factory: factory)
        eventSubscribers = CoreMetrics.Gauge(label: "waf_tokend_event_subscribers", factory: factory)
        sinkWritesFailing = CoreMetrics.Gauge(label: "waf_tokend_sink_writes_failing", factory: factory)
        sinkWritesFailing.record(0)
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

    /// `waf_tokend_token_fetches_total{provider, egress, result}`: `success` or `failure`, through
    /// the egress (`direct`, or a proxy's host and port) the fetch went by (EGRESS-1).
    func countFetch(provider name: String, egress: String, success: Bool) {
        counter(
            in: fetchCounters, label: "waf_tokend_token_fetches_total",
            dimensions: [("provider", name), ("egress", egress), ("result", success ? "success" : "failure")]
        ).increment()
    }

    /// A provider left the configuration: its series leave the exposition.
    func forget(provider name: String) {
        providers.withLockedValue { $0.removeValue(forKey: name) }?.destroy()
        // The proxy's series too: its counters exist from the proxy's start, used or not.
        for cache in [fetchCounters, proxyCounters, forcedRefreshes, hookRuns, canaryCounters] { forget(name, in: cache) }
        proxyUpstreamTimes.withLockedValue { timers in
            timers = timers.filter { key, _ in key.split(separator: " ").first.map(String.init) != name }
        }
        forgetCanary(provider: name)
    }

    /// A provider's canary stopped: its series go (a last-accepted time left behind would fire
    /// WAFTokenNotAccepted for ever); the solver's counts stay.
    func forgetCanary(provider name: String) {
        forget(name, in: canaryCounters) { $0.hasPrefix("waf_tokend_canary_total ") }
        canaryAcceptedAt.withLockedValue { $0.removeValue(forKey: name) }?.destroy()
    }

    /// Removes the counters of `cache` whose first dimension is the provider `name`.
    private func forget(_ name: String, in cache: NIOLockedValueBox<[String: CoreMetrics.Counter]>, where chosen: (String) -> Bool = { _ in true }) {
        let counters = cache.withLockedValue { counters in
            let keys = counters.keys.filter { chosen($0) && $0.split(separator: " ").dropFirst().first.map(String.init) == name }
            return keys.compactMap { counters.removeValue(forKey: $0) }
        }
        counters.forEach { $0.destroy() }
    }

    private func provider(_ name: String) -> ProviderMetrics {
        providers.withLockedValue { providers in
            if let metrics = providers[name] { return metrics }
            let metrics = ProviderMetrics(name, factory: factory)
            providers[name] = metrics
            return metrics
        }
    }

    /// `waf_tokend_forced_refreshes_total{provider, result}`: `fetched`, `joined` or `limited`
    /// (refresh.minForcedIntervalSec, TENANT-4).
    func countForcedRefresh(provider: String, _ decision: ForcedRefresh.Decision) {
        counter(in: forcedRefreshes, label: "waf_tokend_forced_refreshes_total", dimensions: [("provider", provider), ("result", decision.name)])
            .increment()
    }

    /// `waf_tokend_hook_runs_total{provider, action, result}`: a delivery action's run ended
    /// (`success`, `failure`, `timeout`).
    func countHookRun(provider: String, action: String, result: String) {
        counter(in: hookRuns, label: "waf_tokend_hook_runs_total", dimensions: [("provider", provider), ("action", action), ("result", result)])
            .increment()
    }

    /// `waf_tokend_canary_total{provider, egress, result}`: `accepted`, `challenged`, `captcha`,
    /// `unreachable`, and `proxyChallenged` (the proxy's evidence), by the canary's egress.
    func countCanary(provider: String, egress: String, result: String) {
        counter(
            in: canaryCounters, label: "waf_tokend_canary_total", dimensions: [("provider", provider), ("egress", egress), ("result", result)]
        ).increment()
    }

    /// `waf_tokend_canary_last_accepted_timestamp_seconds{provider}`.
    func canaryAccepted(provider: String, at date: Date) {
        acceptedGauge(provider).gauge.record(date.timeIntervalSince1970)
    }

    /// A canary starts: until its first accepted answer the gauge holds this time, unless an
    /// earlier canary of the provider (before a change of its settings) set it.
    func canaryStarted(provider: String, at date: Date) {
        let (gauge, made) = acceptedGauge(provider)
        if made { gauge.record(date.timeIntervalSince1970) }
    }

    private func acceptedGauge(_ provider: String) -> (gauge: CoreMetrics.Gauge, made: Bool) {
        canaryAcceptedAt.withLockedValue { gauges in
            if let gauge = gauges[provider] { return (gauge, false) }
            let gauge = CoreMetrics.Gauge(
                label: "waf_tokend_canary_last_accepted_timestamp_seconds", dimensions: [("provider", provider)], factory: factory)
            gauges[provider] = gauge
            return (gauge, true)
        }
    }

    /// `waf_tokend_challenge_unsolvable_total{provider, reason}`: `unknownType`, `unknownDifficulty`
    /// (a challenge the solver cannot solve), `captcha` (a CAPTCHA the canary or the proxy met).
    func countUnsolvable(provider: String, reason: String) {
        counter(in: canaryCounters, label: "waf_tokend_challenge_unsolvable_total", dimensions: [("provider", provider), ("reason", reason)])
            .increment()
    }

    func countSignal(_ name: String) {
        counter(in: signals, label: "waf_tokend_signals_total", dimension: ("signal", name)).increment()
    }

    func countReload(success: Bool) {
        counter(in: reloads, label: "waf_tokend_reloads_total", dimension: ("result", success ? "success" : "failure")).increment()
    }

    // MARK: The proxy

    /// The proxy's request counters of `provider` by status class (index 0 for 1xx … 4 for 5xx),
    /// for a proxy to keep: looking one up costs a lock and a string key, each request.
    func proxyRequestCounters(provider: String) -> [CoreMetrics.Counter] {
        (1...5).map {
            counter(in: proxyCounters, label: "waf_tokend_proxy_requests_total", dimensions: [("provider", provider), ("class", "\($0)xx")])
        }
    }

    /// `challenge` (an upstream's 202 challenge seen), `replay` (a request sent once more),
    /// `unreachable`, `timeout`, `closed` (upstream failures).
    func countProxyEvent(provider: String, _ event: String) {
        counter(in: proxyCounters, label: "waf_tokend_proxy_events_total", dimensions: [("provider", provider), ("event", event)]).increment()
    }

    /// The proxy's upstream timer of `provider` through `egress` (from the request's last byte
    /// sent upstream to the answer's head), for a proxy's route to keep.
    func upstreamTimer(provider: String, egress: String) -> CoreMetrics.Timer {
        let times = proxyUpstreamTimes.withLockedValue { timers in
            let key = provider + " " + egress
            if let times = timers[key] { return times }
            let times = UpstreamTimes(provider: provider, egress: egress)
            timers[key] = times
            return times
        }
        return CoreMetrics.Timer(label: UpstreamTimes.name, dimensions: [("provider", provider), ("egress", egress)], handler: times)
    }

    /// The Prometheus text exposition, with each provider's gauges read fresh from its status.
    func exposition(statuses: [(provider: String, status: WAFProviderStatus)]) -> [UInt8] {
        for (name, status) in statuses {
            let metrics = provider(name)
            metrics.tokenPresent.record(status.token == nil ? 0 : 1)
            metrics.tokenAge.record(status.token?.age.seconds ?? 0)
            metrics.tokenStale.record(status.token?.stale == false ? 0 : 1)
            metrics.consecutiveFailures.record(status.refresh.consecutiveFailures)
            metrics.lifecycleActive.record(status.lifecycle.active ? 1 : 0)
        }
        var exposition = registry.emitToBuffer()
        let upstream = proxyUpstreamTimes.withLockedValue { $0 }.sorted { $0.key < $1.key }
        if !upstream.isEmpty {
            exposition += Array("# TYPE \(UpstreamTimes.name) histogram\n".utf8)
            for (_, times) in upstream { times.emit(into: &exposition) }
        }
        return exposition
    }

    private func counter(
        in cache: NIOLockedValueBox<[String: CoreMetrics.Counter]>, label: String, dimension: (String, String)
    ) -> CoreMetrics.Counter {
        counter(in: cache, label: label, dimensions: [dimension])
    }

    private func counter(
        in cache: NIOLockedValueBox<[String: CoreMetrics.Counter]>, label: String, dimensions: [(String, String)]
    ) -> CoreMetrics.Counter {
        cache.withLockedValue { counters in
            let key = ([label] + dimensions.map(\.1)).joined(separator: " ")
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            counters[key] = counter
            return counter
        }
    }
}

extension DaemonMetrics: APIMetrics, ProxyMetrics {
    func challengedAcceptedToken(provider: String) {
        canaryEvidence.withLockedValue { $0 }?(provider)
    }

    func metCaptcha(provider: String) {
        countUnsolvable(provider: provider, reason: "captcha")
    }

    func connectionsChanged(_ count: Int) {
        connections.record(count)
    }

    func eventSubscribersChanged(_ count: Int) {
        eventSubscribers.record(count)
    }
}
