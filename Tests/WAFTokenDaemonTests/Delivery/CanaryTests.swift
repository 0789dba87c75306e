import Foundation
import Testing
import WAFJSON
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// The token canary with the real daemon and the local token service's protected resource, whose
/// key rotates and which asks for a CAPTCHA on request (docs/canary.md).
@Suite("The token canary", .offPool, .timeLimit(.minutes(2)))
struct CanaryTests {
    static func canary(_ daemon: DaemonProcess) async -> JSONValue? {
        (try? await status(daemon))?["canary"]
    }

    static func arguments(_ service: ServiceProcess) -> [String] {
        ["--canary-url", service.origin + "/protected/canary", "--canary-interval-sec", "10"]
    }

    @Test(
        "CANARY2: after the web ACL's key rotates, the canary is challenged, the daemon refreshes once, and the next probe is accepted, in about one fetch's time"
    )
    func CANARY2_rotation() async throws {
        try await withDaemon(naming: Self.arguments) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { await Self.canary(daemon)?["state"]?.string == "accepted" }, "the first probe: accepted")
            let issued = try await service.counters().tokensIssued
            try await service.rotateKey()
            // The next probe (within canary.intervalSec) meets the challenge, refreshes, probes again.
            let clock = ContinuousClock()
            let rotated = clock.now
            #expect(
                await eventually(for: .seconds(20)) {
                    let metrics = (try? await curl(daemon.socketPath, "/metrics").body) ?? ""
                    return metrics.contains(#"waf_tokend_canary_total{provider="default",egress="direct",result="challenged"} 1"#)
                        && metrics.contains(#"waf_tokend_canary_total{provider="default",egress="direct",result="accepted"} 2"#)
                }, "challenged once, then accepted")
            #expect(clock.now - rotated < .seconds(15), "within an interval and a fetch")
            #expect(try await service.counters().tokensIssued == issued + 1, "one forced refresh")
            #expect(await Self.canary(daemon)?["state"]?.string == "accepted", "never reported rejected")
            #expect(try await curl(daemon.socketPath, "/readyz?provider=default").code == 200)
        }
    }

    @Test(
        "CANARY3: with a CAPTCHA the provider is rejected: /readyz?provider= is 503, a canary event goes out, the metrics count; once it is lifted, accepted again"
    )
    func CANARY3_captcha() async throws {
        try await withDaemon(naming: Self.arguments) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { await Self.canary(daemon)?["state"]?.string == "accepted" })
            let directory = try scratchDirectory("waf-canary-events")
            let events = directory.appendingPathComponent("events").path
            let stream = try SpawnedProcess(
                "/usr/bin/curl", ["-sN", "--max-time", "60", "--unix-socket", daemon.socketPath, "http://localhost/v1/events"], output: events)
            defer { stream.signal(SIGKILL) }
            try await service.askForCaptcha(true)
            #expect(await eventually(for: .seconds(20)) { await Self.canary(daemon)?["state"]?.string == "rejected" }, "rejected")
            #expect(try await curl(daemon.socketPath, "/readyz?provider=default").code == 503)
            #expect(try await curl(daemon.socketPath, "/readyz").code == 503)
            let said = { (try? String(contentsOfFile: events, encoding: .utf8)) ?? "" }
            #expect(await eventually { said().contains("event: canary") && said().contains(#""state":"rejected""#) }, "\(said())")
            let metrics = try await curl(daemon.socketPath, "/metrics").body
            #expect(metrics.contains(#"waf_tokend_canary_total{provider="default",egress="direct",result="captcha"}"#))
            #expect(metrics.contains(#"waf_tokend_challenge_unsolvable_total{provider="default",reason="captcha"}"#))
            #expect(metrics.contains(#"waf_tokend_canary_last_accepted_timestamp_seconds{provider="default"}"#))
            try await service.askForCaptcha(false)
            // The back-off of RET-1…2: the next probe comes within maxErrorTokenRefreshDelayMsec.
            #expect(await eventually(for: .seconds(20)) { await Self.canary(daemon)?["state"]?.string == "accepted" }, "accepted again")
            #expect(try await curl(daemon.socketPath, "/readyz?provider=default").code == 200)
        }
    }

    @Test("CANARY5: a challenge the proxy meets on the token the canary saw accepted is an event, and asks the canary again at once")
    func CANARY5_proxyEvidence() async throws {
        let proxy = try scratchDirectory("waf-canary-proxy").appendingPathComponent("proxy.sock").path
        try await withDaemon(naming: { service in Self.arguments(service) + ["--proxy-listen", proxy, "--proxy-upstream", service.origin] }) {
            service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { await Self.canary(daemon)?["state"]?.string == "accepted" })
            try await service.rotateKey()
            // The proxy's request carries the accepted token, is challenged, refreshed and replayed.
            #expect(try await curl(proxy, "/protected/x").code == 200)
            #expect(
                await eventually {
                    ((try? await curl(daemon.socketPath, "/metrics").body) ?? "").contains(
                        #"waf_tokend_canary_total{provider="default",egress="direct",result="proxyChallenged"} 1"#)
                })
            #expect(daemon.stderr.contains("the proxy met a challenge on a token the canary saw accepted"))
        }
    }

    @Test(
        "CANARY7: a canary URL that always challenges costs one forced refresh, not one per probe: fetches counted over the real socket for 20 s of fast back-off"
    )
    func CANARY7_noStormOfRefreshes() async throws {
        // The web ACL refuses every token, whatever it is.
        let acl = try await ScriptedUpstream { _ in
            .init("HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 0\r\n\r\n")
        }
        defer { Task { await acl.stop() } }
        let arguments = [
            "--canary-url", acl.origin + "/canary", "--canary-interval-sec", "10",
            // A back-off that reaches its longest wait at once, and forced fetches allowed every
            // second: without the episode's rule, one fetch a second.
            "--max-error-token-refresh-delay-msec", "500", "--refresh-min-forced-interval-sec", "1",
        ]
        try await withDaemon(daemon: arguments) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { await Self.canary(daemon)?["state"]?.string == "rejected" }, "the canary finds the token refused")
            let issued = try await service.counters().tokensIssued
            try await Task.sleep(for: .seconds(20))
            let probes = acl.requests.count
            let fetched = try await service.counters().tokensIssued - issued
            print("canary: \(probes) probes of a URL that always challenges, \(fetched) tokens fetched in the 20 s after the rejection")
            #expect(probes >= 10, "the canary went on probing on the back-off (\(probes))")
            #expect(fetched == 0, "no forced refresh after the episode's one (\(fetched) fetched)")
            #expect(await Self.canary(daemon)?["state"]?.string == "rejected")
        }
    }
}
