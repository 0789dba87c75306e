import AsyncHTTPClient
import Logging
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFProviderRegistry
import WAFSocketAPI
import WAFTokenCanary
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Each provider's token canary (`canary.url`, docs/canary.md), by provider name, each with an
/// HTTP client of its own (on the shared event loops) that ends with it; and what they report, as
/// metrics, events and log lines.
final class Canaries: CanaryReporting, Sendable {
    private struct Running {
        let key: Key
        let service: CanaryService
        let client: HTTPClient

        /// No more probes; the client closes once a probe under way has ended (its answer is
        /// dropped: the service is stopped).
        func stop() {
            service.stop()
            client.shutdown(queue: .global()) { _ in }
        }
    }

    private let services = NIOLockedValueBox<[String: Running]>([:])
    /// When the last proxy evidence of each provider was reported: at most one a second.
    private let lastEvidence = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])
    private let metrics: DaemonMetrics
    private let broadcaster: EventBroadcaster
    private let logger: Logger

    /// What a canary is made of: a change makes a new one.
    private struct Key: Equatable {
        let url: String
        let method: String
        let settings: CanaryMachine.Settings
        let affectsReadiness: Bool
        let header: Bool
        let caFile: String?
        let timeout: Int
        /// Its way out: the provider's egress for the canary's URL (EGRESS-1).
        let route: OutboundRoute
    }

    init(metrics: DaemonMetrics, broadcaster: EventBroadcaster, logger: Logger) {
        self.metrics = metrics
        self.broadcaster = broadcaster
        self.logger = logger
    }

    /// Makes `entry`'s canary what `provider`'s configuration says (no `canary.url`: none).
    func configure(_ entry: ProviderEntry, _ provider: ProviderConfiguration, _ configuration: DaemonConfiguration) {
        guard let url = provider[Keys.canaryURL] else { return remove(entry) }
        let sdk = provider.configuration
        let route: OutboundRoute
        do throws(DaemonFailure) {
            route = try OutboundRoute.of(provider, to: url, in: configuration)
        } catch {
            logger.error("canary: its egress cannot be used; no canary: \(error.message)", metadata: ["provider": "\(entry.name)"])
            return remove(entry)
        }
        let key = Key(
            url: url, method: provider[Keys.canaryMethod],
            settings: .init(
                interval: .seconds(provider[Keys.canaryIntervalSec]), maxRetryCount: sdk.maxRetryCount,
                maxErrorDelay: .milliseconds(sdk.maxErrorTokenRefreshDelayMsec)),
            affectsReadiness: provider[Keys.canaryAffectsReadiness], header: provider[Keys.proxyTokenIn] == "header",
            caFile: configuration[Keys.tokenServiceCAFile], timeout: configuration[Keys.tokenServiceTimeoutSec], route: route)
        if services.withLockedValue({ $0[entry.name]?.key }) == key { return }
        let client: HTTPClient
        do {
            client = try CanaryProbe.makeClient(caFile: key.caFile, timeout: .seconds(key.timeout), proxy: route.proxy?.client)
        } catch {
            logger.error("canary: cannot make its HTTP client; no canary", metadata: ["provider": "\(entry.name)", "error": "\(error)"])
            return
        }
        // The cookie only where COOK-1's path covers the URL, as the proxy would send it.
        let path = URLComponents(string: url)?.path ?? "/"
        let placement: CanaryProbe.Placement =
            key.header || !entry.provider.cookieManager.applies(toPath: path.isEmpty ? "/" : path) ? .header : .cookie
        let service = CanaryService(
            entry: entry,
            probe: CanaryProbe(client: client, url: url, method: key.method, timeout: .seconds(key.timeout)),
            placement: placement, settings: key.settings, affectsReadiness: key.affectsReadiness,
            scheduler: DispatchScheduler(label: "waf-tokend.canary.\(entry.name)"), reporting: self, logger: logger)
        services.withLockedValue { $0.updateValue(Running(key: key, service: service, client: client), forKey: entry.name) }?.stop()
        // Until the first accepted answer, the gauge holds the canary's start: a canary never
        // accepted fires WAFTokenNotAccepted as one accepted long ago would.
        metrics.canaryStarted(provider: entry.name, at: Date())
        service.start()
    }

    /// No more probes for `entry` (gone, or its identity changes): its board is cleared.
    func remove(_ entry: ProviderEntry) {
        remove(entry.name)
        entry.canary.configure(url: nil, affectsReadiness: true)
    }

    /// No more probes for `name`.
    func remove(_ name: String) {
        services.withLockedValue { $0.removeValue(forKey: name) }?.stop()
        metrics.forgetCanary(provider: name)
    }

    func stopAll() async {
        for (_, running) in services.withLockedValue({ Array($0) }) {
            running.service.stop()
            try? await running.client.shutdown()
        }
    }

    /// The proxy met a challenge on the token the canary saw accepted last: news, and a probe now.
    /// On the proxy's event loop, so cheap, and at most once a second per provider: a burst of
    /// challenged answers is one piece of news.
    func proxyChallengedAcceptedToken(provider: String) {
        let now = ContinuousClock.now
        let fresh = lastEvidence.withLockedValue { last in
            if let previous = last[provider], previous.duration(to: now) < .seconds(1) { return false }
            last[provider] = now
            return true
        }
        guard fresh else { return }
        metrics.countCanary(provider: provider, egress: egress(of: provider), result: "proxyChallenged")
        broadcaster.publish(named: "canary", CanaryEvent(provider: provider, result: "proxyChallenged", state: nil), provider: provider)
        logger.notice("the proxy met a challenge on a token the canary saw accepted", metadata: ["provider": "\(provider)"])
        services.withLockedValue { $0[provider]?.service }?.probeSoon()
    }

    // MARK: CanaryReporting

    /// The `egress` label of `provider`'s probes.
    private func egress(of provider: String) -> String {
        services.withLockedValue { $0[provider]?.key.route.label } ?? OutboundRoute.direct.label
    }

    func probed(provider: String, result: CanaryMachine.Result, at date: Date) {
        metrics.countCanary(provider: provider, egress: egress(of: provider), result: result.rawValue)
        if result == .accepted { metrics.canaryAccepted(provider: provider, at: date) }
        if result == .captcha { metrics.countUnsolvable(provider: provider, reason: "captcha") }
    }

    func verdictChanged(provider: String, to verdict: CanaryMachine.Verdict, after result: CanaryMachine.Result) {
        broadcaster.publish(named: "canary", CanaryEvent(provider: provider, result: result.rawValue, state: verdict.rawValue), provider: provider)
        let metadata: Logger.Metadata = ["provider": "\(provider)", "result": "\(result.rawValue)"]
        if verdict == .rejected {
            logger.warning("canary: the web ACL does not accept the provider's token", metadata: metadata)
        } else {
            logger.notice("canary: the web ACL accepts the provider's token", metadata: metadata)
        }
    }
}

/// The `canary` event of `/v1/events`.
struct CanaryEvent: Encodable {
    let provider: String
    let result: String
    let state: String?
}
