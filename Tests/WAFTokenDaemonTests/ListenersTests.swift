import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// The listeners beside the socket: probes and metrics over TCP, forward authentication on
/// loopback; and one-shot use.
@Suite("Listeners for the tools operators run, and one-shot use", .offPool, .timeLimit(.minutes(2)))
struct ListenersTests {
    /// `curl http://ADDRESS/PATH`.
    static func get(_ address: String, _ path: String, _ options: [String] = []) async throws -> (code: Int, body: String) {
        let result = try await run("/usr/bin/curl", ["-s", "--max-time", "10", "-w", "\n%{http_code}"] + options + ["http://\(address)\(path)"])
        var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let code = Int(lines.popLast() ?? "") ?? 0
        return (code, lines.joined(separator: "\n"))
    }

    @Test("metrics.listen serves /metrics, /healthz and /readyz (?provider= too) to anyone, and nothing else: never a token")
    func metricsListener() async throws {
        try await withDaemon(daemon: ["--metrics-listen", "127.0.0.1:0"]) { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let address = try await daemon.listening("metrics.listen")
            let metrics = try await Self.get(address, "/metrics")
            #expect(metrics.code == 200 && metrics.body.contains("waf_tokend_token_present{provider=\"default\"} 1"), "\(metrics)")
            #expect(try await Self.get(address, "/healthz").code == 200)
            #expect(try await Self.get(address, "/readyz").code == 200)
            #expect(try await Self.get(address, "/readyz?provider=default").code == 200)
            #expect(try await Self.get(address, "/readyz?provider=nope").code == 404)
            for path in ["/v1/token", "/v1/cookie", "/v1/events", "/v1/status", "/v1/auth", "/v1/refresh"] {
                let answer = try await Self.get(address, path)
                #expect(answer.code == 404 && !answer.body.contains(token.value), "\(path): \(answer)")
            }
            #expect(try await Self.get(address, "/v1/refresh", ["-X", "POST"]).code == 404)
        }
    }

    @Test("auth.listen answers /v1/auth to the users its lists name, found by their TCP connection; others get 403")
    func authListener() async throws {
        try await withDaemon(daemon: ["--auth-listen", "127.0.0.1:0", "--auth-allowed-users", "root"]) { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let address = try await daemon.listening("auth.listen")
            let answer = try await Self.get(address, "/v1/auth", ["-D", "-", "-H", "X-Original-URI: /x", "-H", "Cookie: a=1"])
            #expect(
                answer.code == 200 && answer.body.contains("X-Aws-Waf-Token: \(token.value)") && answer.body.contains("Cookie: a=1; aws-waf-token="))
            #expect(try await Self.get(address, "/v1/token").code == 404, "auth.listen serves forward authentication only")
            let other = try await run(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                    "http://\(address)/v1/auth",
                ])
            #expect(other.stdout == "403", "another user, by its connection's owner: \(other.stdout)")
        }
    }

    @Test("--once: the token alone on stdout, its files written, 0; the saved token reused while fresh; 69 without one; 78 for a bad configuration")
    func once() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-once")
        let state = directory.appendingPathComponent("state").path, file = directory.appendingPathComponent("token").path
        let arguments = [
            "--once", "--config", "/dev/null", "--application-integration-url", service.url, "--domain-name", "127.0.0.1", "--state-directory", state,
            "--sinks-token-file", file,
        ]
        let first = try await run(productsDirectory.appendingPathComponent("waf-tokend").path, arguments)
        #expect(first.status == 0, "\(first.stderr)")
        let token = first.stdout.trimmingCharacters(in: .newlines)
        #expect(!token.isEmpty && !token.contains("\n"))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == token)
        #expect(FileManager.default.fileExists(atPath: state + "/token.json"))
        let issued = try await service.counters().tokensIssued
        let again = try await run(productsDirectory.appendingPathComponent("waf-tokend").path, arguments + ["--print", "cookie"])
        #expect(again.status == 0 && again.stdout == "aws-waf-token=\(token)\n", "the saved token, as the Cookie header value")
        #expect(try await service.counters().tokensIssued == issued, "no fetch while the saved token is fresh")
        await service.stop()
        let down = try await run(
            productsDirectory.appendingPathComponent("waf-tokend").path,
            [
                "--once", "--config", "/dev/null", "--application-integration-url", service.url, "--domain-name", "127.0.0.1", "--max-retry-count",
                "1",
                "--max-error-token-refresh-delay-msec", "10",
            ])
        #expect(down.status == 69 && down.stderr.contains("no token:") && down.stdout.isEmpty, "\(down)")
        let bad = try await run(
            productsDirectory.appendingPathComponent("waf-tokend").path, ["--once", "--config", "/dev/null", "--domain-name", "127.0.0.1"])
        #expect(bad.status == 78 && bad.stderr.contains("applicationIntegrationUrl"), "\(bad)")
    }
}
