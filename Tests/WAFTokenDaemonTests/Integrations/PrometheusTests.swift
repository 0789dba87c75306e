import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// Debian's Prometheus scraping a running daemon's metrics.listen, with deploy/prometheus/ as an
/// operator would set it up.
@Suite("Prometheus scrapes metrics.listen", .offPool, .timeLimit(.minutes(2)))
struct PrometheusTests {
    @Test("deploy/prometheus/prometheus.yml: up is 1, the daemon's series are there, the alert rules are loaded")
    func scraped() async throws {
        try await withDaemon(daemon: ["--metrics-listen", "127.0.0.1:0"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let metrics = try await daemon.listening("metrics.listen")
            let directory = try scratchDirectory("waf-prometheus")
            let configuration = try deployExample(
                "deploy/prometheus/prometheus.yml",
                [
                    ("127.0.0.1:9464", metrics), ("scrape_interval: 15s", "scrape_interval: 1s"),
                    ("evaluation_interval: 15s", "evaluation_interval: 1s"),
                ])
            try configuration.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
            try FileManager.default.copyItem(
                at: repositoryDirectory.appendingPathComponent("deploy/prometheus/alerts.yml"), to: directory.appendingPathComponent("alerts.yml"))
            let prometheus = try SpawnedProcess(
                "/usr/bin/prometheus",
                [
                    "--config.file=\(directory.path)/prometheus.yml", "--storage.tsdb.path=\(directory.path)/data",
                    "--web.listen-address=127.0.0.1:0",
                ], output: directory.appendingPathComponent("stdout.log").path, errors: directory.appendingPathComponent("stderr.log").path)
            defer { _ = prometheus }
            let port = try #require(await listeningPort(of: prometheus.pid), "Prometheus listens on one port within 60 s")
            let api = "http://127.0.0.1:\(port)/api/v1"
            func query(_ expression: String) async -> String {
                (try? await curlURL("\(api)/query", ["-G", "--data-urlencode", "query=\(expression)"]).body) ?? ""
            }
            #expect(await eventually(for: .seconds(45)) { await query(#"up{job="waf-tokend"}"#).contains(#""1"]"#) }, "up is 1")
            let present = await query("waf_tokend_token_present")
            #expect(present.contains(#""provider":"default""#) && present.contains(#""1"]"#), "\(present)")
            let rules = (try? await curlURL("\(api)/rules").body) ?? ""
            for alert in [
                "WAFTokendDown", "WAFTokenNotFresh", "WAFTokenRefreshFailing", "WAFTokendSinkWriteFailing", "WAFTokendProxyErrors", "WAFTokenCaptcha",
                "WAFTokenNotAccepted", "WAFTokenChallengeUnsolvable", "WAFTokendDeliveryFailing",
            ] {
                #expect(rules.contains(alert), "\(alert) loaded")
            }
            _ = await prometheus.stop()
        }
    }
}
