import Foundation
import Testing
import WAFChallenge
import WAFDaemonClient
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore

/// The socket API (docs/socket-api.md), against the real daemon and the real local token service, with
/// curl as the client (what an operator or a shell script would use).
@Suite("Socket API", .offPool, .timeLimit(.minutes(2)))
struct SocketAPITests {
    @Test("GET /v1/token: JSON by default, the bare token for text/plain, the same on the fast path and the codec path")
    func tokenEndpoint() async throws {
        try await withDaemon { service, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let (code, body) = try await curl(daemon.socketPath, "/v1/token")
            #expect(code == 200)
            let document = try #require(json(body))
            #expect(document["value"] == .string(token.value))
            #expect(document["stale"] == .bool(false))
            #expect(document["ageSeconds"]?.integer.map { $0 >= 0 } == true)
            #expect(document["fetchedAt"]?.string?.hasSuffix("Z") == true)

            // "Connection: keep-alive" sends the request through the full HTTP codec instead.
            let codec = try await curl(daemon.socketPath, "/v1/token", ["-H", "Connection: keep-alive"])
            #expect(json(codec.body)?["value"] == document["value"])
            #expect(try await curl(daemon.socketPath, "/v1/token", ["-H", "Accept: text/plain"]) == (200, token.value))
            #expect(
                try await curl(daemon.socketPath, "/v1/token", ["-H", "Accept: text/plain", "-H", "Connection: keep-alive"]) == (200, token.value))
            let head = try await run("/usr/bin/curl", ["-s", "-I", "--unix-socket", daemon.socketPath, "http://localhost/v1/token"])
            #expect(head.stdout.hasPrefix("HTTP/1.1 200 OK"))
            #expect(head.stdout.contains("Cache-Control: no-store"))
            #expect(service.url.isEmpty == false)
        }
    }

    @Test("before the first token: /v1/token answers 503 with Retry-After, /readyz 503, ?wait= 504 when it passes")
    func noTokenYet() async throws {
        try await withDaemon(service: ["--stall-next", "1", "--fault-target", "inputs"], daemon: ["--token-service-timeout-sec", "60"]) { _, daemon in
            let headers = try await run("/usr/bin/curl", ["-s", "-i", "--unix-socket", daemon.socketPath, "http://localhost/v1/token"])
            #expect(headers.stdout.hasPrefix("HTTP/1.1 503"))
            #expect(headers.stdout.contains("Retry-After: 1"))
            #expect(headers.stdout.contains(#""error":"noToken""#))
            #expect(try await curl(daemon.socketPath, "/readyz").code == 503)
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
            let waited = try await curl(daemon.socketPath, "/v1/token?wait=0.3")
            #expect(waited.code == 504)
            #expect(json(waited.body)?["error"] == .string("timeout"))
        }
    }

    @Test("GET /v1/token?wait=: the token, 503 with the SdkError name after RET-3, 400 for a bad wait")
    func waitForToken() async throws {
        try await withDaemon { _, daemon in
            let waited = try await curl(daemon.socketPath, "/v1/token?wait=10")
            #expect(waited.code == 200)
            #expect(json(waited.body)?["value"]?.string?.isEmpty == false)
            for bad in ["abc", "0", "-1", "99999"] {
                let answer = try await curl(daemon.socketPath, "/v1/token?wait=\(bad)")
                #expect(answer.code == 400, "wait=\(bad)")
            }
        }
        try await withDaemon(service: ["--fail-next", "1000"], daemon: ["--max-retry-count", "1"]) { service, daemon in
            let answer = try await curl(daemon.socketPath, "/v1/token?wait=20")
            #expect(answer.code == 503)
            #expect(json(answer.body)?["error"] == .string("allRetriesFailed"))
            #expect(json(answer.body)?["message"]?.string?.contains("HTTP 503") == true)
            #expect(try await service.counters().inputs >= 2)
        }
    }

    @Test("POST /v1/refresh: a new token now; while the service fails, 503 after RET-3 and the old token stays")
    func refreshEndpoint() async throws {
        try await withDaemon(daemon: ["--max-retry-count", "1"]) { service, daemon in
            let first = try await daemon.client.tokenReady(wait: .seconds(10))
            let refreshed = try await run(
                "/usr/bin/curl", ["-s", "-X", "POST", "--unix-socket", daemon.socketPath, "http://localhost/v1/refresh?wait=10"])
            let second = try #require(json(refreshed.stdout)?["value"]?.string)
            #expect(second != first.value)
            try await service.arm(FaultRule(kind: .fail, count: 100))
            let failed = try await run(
                "/usr/bin/curl", ["-s", "-w", "%{http_code}", "-X", "POST", "--unix-socket", daemon.socketPath, "http://localhost/v1/refresh"])
            #expect(failed.stdout.hasSuffix("503"))
            #expect(failed.stdout.contains("allRetriesFailed"))
            #expect(try await daemon.client.getToken()?.value == second)
            #expect(try await curl(daemon.socketPath, "/v1/refresh").code == 405)
        }
    }

    @Test("GET /v1/cookie: the Cookie header for paths under tokenCookiePath (COOK-1), 404 elsewhere, JSON on request")
    func cookieEndpoint() async throws {
        try await withDaemon(daemon: ["--token-cookie-path", "/web/login", "--cookie-secure", "true"]) { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=/web/login/help") == (200, "aws-waf-token=\(token.value)"))
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=%2Fweb%2Flogin") == (200, "aws-waf-token=\(token.value)"))
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=/web").code == 404)
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=/web/loginx").code == 404)
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=web").code == 400)
            let document = try #require(
                json(try await curl(daemon.socketPath, "/v1/cookie?path=/web/login", ["-H", "Accept: application/json"]).body))
            #expect(document["domain"] == .string("127.0.0.1"))
            #expect(document["path"] == .string("/web/login"))
            #expect(document["secure"] == .bool(true))
            #expect(document["sameSite"] == .string("Lax"))
            #expect(document["expires"]?.string?.hasSuffix("Z") == true)
            #expect(try await daemon.client.cookie(forPath: "/web/login/x") == "aws-waf-token=\(token.value)")
        }
        try await withDaemon(daemon: ["--set-token-cookie", "false"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let answer = try await curl(daemon.socketPath, "/v1/cookie?path=/")
            #expect(answer.code == 404)
            #expect(json(answer.body)?["message"]?.string?.contains("setTokenCookie") == true)
        }
    }

    @Test("GET /v1/events: the current token and lifecycle, then token, lifecycle and error events as they happen")
    func eventStream() async throws {
        try await withDaemon(daemon: ["--max-retry-count", "0"]) { service, daemon in
            let first = try await daemon.client.tokenReady(wait: .seconds(10))
            var events = daemon.client.events().makeAsyncIterator()
            let opening = [try await events.next(), try await events.next()].compactMap { $0 }
            #expect(opening.map(\.name) == ["token", "lifecycle"])
            #expect(json(opening[0].data)?["value"] == .string(first.value))
            #expect(json(opening[0].data)?["fingerprint"]?.string?.count == 8)

            _ = try await curl(daemon.socketPath, "/v1/lifecycle", ["-X", "PUT", "-d", "background"])
            let lifecycle = try #require(try await events.next())
            #expect(lifecycle.name == "lifecycle")
            #expect(json(lifecycle.data)?["state"] == .string("background"))

            let refreshed = try await daemon.client.refresh()
            var next = try #require(try await events.next())
            while next.name == "lifecycle" { next = try #require(try await events.next()) }
            #expect(next.name == "token")
            #expect(json(next.data)?["value"] == .string(refreshed.value))

            try await service.arm(FaultRule(kind: .fail, count: 1, status: 500))
            _ = try? await daemon.client.refresh(wait: .seconds(5))
            let error = try #require(try await events.next())
            #expect(error.name == "error")
            #expect(json(error.data)?["error"] == .string("errorInvokingGetChallengeEndpoint"))
            #expect(json(error.data)?["consecutiveFailures"] == .number(1))
        }
    }

    @Test("GET /v1/status: lifecycle, refresh and token (without its value) and counters")
    func statusEndpoint() async throws {
        try await withDaemon(daemon: ["--lifecycle-platform", "android"]) { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let (code, body) = try await curl(daemon.socketPath, "/v1/status")
            #expect(code == 200)
            #expect(!body.contains(token.value))
            let document = try #require(json(body))
            #expect(document["lifecycle"]?["state"] == .string("foreground"))
            #expect(document["lifecycle"]?["profile"] == .string("android"))
            #expect(document["lifecycle"]?["active"] == .bool(true))
            #expect(document["refresh"]?["state"] == .string("scheduled"))
            #expect(document["refresh"]?["nextAt"]?.string?.hasSuffix("Z") == true)
            #expect(document["refresh"]?["consecutiveFailures"] == .number(0))
            #expect(document["refresh"]?["lastError"] == .null)
            #expect(document["token"]?["fingerprint"] == .string(WAFToken.fingerprint(of: token.value)))
            #expect(document["token"]?["stale"] == .bool(false))
            #expect(document["token"]?["ageSeconds"]?.integer != nil)
            #expect(document["counters"]?["fetchSuccesses"] == .number(1))
        }
    }

    @Test("PUT /v1/lifecycle: the same as the signals; anything but the three states is refused")
    func lifecycleEndpoint() async throws {
        try await withDaemon { _, daemon in
            let answer = try await curl(daemon.socketPath, "/v1/lifecycle", ["-X", "PUT", "--data-binary", "background"])
            #expect(answer.code == 200)
            #expect(json(answer.body)?["lifecycle"]?["state"] == .string("background"))
            #expect(try await status(daemon)["lifecycle"]?["active"] == .bool(false))
            #expect(
                try await curl(
                    daemon.socketPath, "/v1/lifecycle", ["-X", "PUT", "-H", "Content-Type: application/json", "-d", #"{"state": "closed"}"#]
                ).code == 200)
            #expect(try await status(daemon)["lifecycle"]?["state"] == .string("closed"))
            #expect(try await curl(daemon.socketPath, "/v1/lifecycle", ["-X", "PUT", "-d", "sideways"]).code == 400)
            let wrong = try await run("/usr/bin/curl", ["-s", "-i", "--unix-socket", daemon.socketPath, "http://localhost/v1/lifecycle"])
            #expect(wrong.stdout.hasPrefix("HTTP/1.1 405"))
            #expect(wrong.stdout.contains("Allow: PUT"))
        }
    }

    @Test("/healthz and /readyz; without background refresh /v1/token fetches anew and /readyz is 200 at once")
    func healthReadyAndOnDemand() async throws {
        try await withDaemon { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
            #expect(try await curl(daemon.socketPath, "/readyz").code == 200)
        }
        try await withDaemon(daemon: ["--background-refresh-enabled", "false"]) { service, daemon in
            #expect(try await curl(daemon.socketPath, "/readyz").code == 200)
            #expect(try await service.counters().inputs == 0, "nothing is fetched before it is asked for")
            let first = try await curl(daemon.socketPath, "/v1/token", ["-H", "Accept: text/plain"])
            let second = try await curl(daemon.socketPath, "/v1/token", ["-H", "Accept: text/plain"])
            #expect(first.code == 200 && second.code == 200)
            #expect(first.body != second.body, "TOK-2: every call fetches a new token")
            #expect(try await service.counters().tokensIssued == 2)
        }
    }

    @Test("GET /metrics: Prometheus text with requests, fetches and gauges, and no token")
    func metricsEndpoint() async throws {
        try await withDaemon { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            for _ in 0..<3 { _ = try await curl(daemon.socketPath, "/v1/token") }
            let (code, body) = try await curl(daemon.socketPath, "/metrics")
            #expect(code == 200)
            // Every provider metric carries its provider (MULTI-5).
            #expect(body.contains(#"waf_tokend_token_fetches_total{provider="default",egress="direct",result="success"} 1"#))
            #expect(body.contains("waf_tokend_http_requests_total{"))
            #expect(body.contains(#"waf_tokend_token_present{provider="default"} 1"#))
            #expect(body.contains("# TYPE waf_tokend_connections gauge"))
            #expect(!body.contains(token.value))
        }
    }
}
