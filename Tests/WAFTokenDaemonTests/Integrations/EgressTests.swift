import Foundation
import Testing
import WAFJSON
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// One egress per provider (EGRESS-1), through the real squid of Debian, in front of a local token
/// service that binds each token to the address it was fetched from, as Bot Control's token-reuse
/// rules do. squid's own connections leave from 127.0.0.2: a second egress on one host.
@Suite("Egress through squid", .offPool, .timeLimit(.minutes(3)))
struct EgressTests {
    static func port(of service: ServiceProcess) -> Int { URL(string: service.origin)?.port ?? 0 }

    static func canaryState(_ daemon: DaemonProcess) async -> String? {
        (try? await status(daemon))?["canary"]?["state"]?.string
    }

    static func lastError(_ daemon: DaemonProcess) async -> String {
        (try? await status(daemon))?["refresh"]?["lastError"]?["message"]?.string ?? ""
    }

    static func failures(_ daemon: DaemonProcess) async -> Int {
        (try? await status(daemon))?["refresh"]?["consecutiveFailures"]?.integer ?? 0
    }

    static func metrics(_ daemon: DaemonProcess) async -> String {
        (try? await curl(daemon.socketPath, "/metrics").body) ?? ""
    }

    /// An upstream of the proxy's, answering 200 to everything.
    static func upstream() async throws -> ScriptedUpstream {
        try await ScriptedUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
    }

    @Test(
        "EGRESS2: with egress.proxy set, the token service, the canary and the proxy's upstream all go through squid, and nothing goes around it"
    )
    func EGRESS2_everyPathThroughSquid() async throws {
        let squid = try await Squid()
        let upstream = try await Self.upstream()
        let proxy = try scratchDirectory("waf-egress").appendingPathComponent("proxy.sock").path
        let upstreamAuthority = String(upstream.origin.dropFirst("http://".count))
        var port = 0
        do {
            try await withDaemon(
                service: ["--bind-tokens-to-addresses"],
                daemon: [
                    "--egress-proxy", squid.url, "--proxy-listen", proxy, "--proxy-upstream", upstream.origin, "--domain-name", "localhost",
                    "--canary-interval-sec", "10",
                ],
                // The canary by another name than the token service's: one line each in squid's log.
                naming: { ["--canary-url", "http://localhost:\(Self.port(of: $0))/protected/canary"] }
            ) { service, daemon in
                port = Self.port(of: service)
                _ = try await daemon.client.tokenReady(wait: .seconds(20))
                #expect(await eventually(for: .seconds(20)) { await Self.canaryState(daemon) == "accepted" }, "the canary, through squid")
                #expect(try await curl(proxy, "/through").code == 200)
                #expect(upstream.requests.map(\.from) == ["127.0.0.2"], "the proxy's request, from squid's address")
                let calls = try await service.counters().calls
                #expect(Set(calls.map(\.endpoint)) == ["inputs", "verify", "protected"])
                #expect(calls.allSatisfy { $0.from == "127.0.0.2" }, "every call through squid: \(calls.map { "\($0.endpoint) \($0.from ?? "?")" })")
                let metrics = await Self.metrics(daemon)
                for series in [
                    #"waf_tokend_token_fetches_total{provider="default",egress="\#(squid.label)",result="success"} 1"#,
                    #"waf_tokend_canary_total{provider="default",egress="\#(squid.label)",result="accepted"}"#,
                    #"waf_tokend_proxy_upstream_seconds_count{provider="default",egress="\#(squid.label)"} 1"#,
                ] {
                    #expect(metrics.contains(series), "\(series) in the metrics")
                }
                #expect(daemon.stderr.contains("egress: proxy \(squid.label) (egress.proxy)"), "the start line says the egress")
                // squid logs a CONNECT when its tunnel closes: the daemon's, at its stop.
                _ = await daemon.stop()
            }
            let tunnels = await squid.entries(atLeast: 3) { $0.method == "CONNECT" }
            for target in ["127.0.0.1:\(port)", "localhost:\(port)", upstreamAuthority] {
                #expect(
                    tunnels.contains { $0.target == target && $0.status == 200 && $0.outgoing == "127.0.0.2" },
                    "a CONNECT to \(target) in squid's log: \(tunnels)")
            }
        } catch {
            await squid.stop()
            await upstream.stop()
            throw error
        }
        await squid.stop()
        await upstream.stop()
    }

    @Test(
        "EGRESS2: https through squid's CONNECT, TLS and its checks end to end: the WAF accepts at the proxy the token fetched through the same egress; without the CA, no token"
    )
    func EGRESS2_httpsEndToEnd() async throws {
        let squid = try await Squid()
        defer { Task { await squid.stop() } }
        let certificates = try TestCertificates()
        let tls = ["--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey]
        let proxy = try scratchDirectory("waf-egress").appendingPathComponent("proxy.sock").path
        try await withDaemon(
            service: tls + ["--bind-tokens-to-addresses"],
            daemon: [
                "--egress-proxy", squid.url, "--token-service-ca-file", certificates.authority, "--proxy-listen", proxy, "--domain-name",
                "localhost", "--canary-interval-sec", "10",
            ],
            // By name: a certificate named by an address cannot be checked through a proxy by
            // AsyncHTTPClient, which the configuration refuses (EGRESS1_parse).
            naming: { service in
                let origin = "https://localhost:\(Self.port(of: service))"
                let url = service.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
                return ["--application-integration-url", url, "--proxy-upstream", origin, "--canary-url", origin + "/protected/canary"]
            }
        ) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(20))
            #expect(await eventually(for: .seconds(20)) { await Self.canaryState(daemon) == "accepted" }, "the canary, over https through squid")
            let (code, body) = try await curl(proxy, "/protected/x")
            #expect(code == 200, "the WAF accepts the token where it was fetched from: \(body)")
            let counters = try await service.counters()
            #expect(counters.protectedReused == 0)
            #expect(counters.calls.allSatisfy { $0.from == "127.0.0.2" })
        }
        // The upstream's certificate is still checked, by the daemon: without the CA, no token.
        try await withDaemon(
            service: tls, daemon: ["--egress-proxy", squid.url],
            naming: { ["--application-integration-url", $0.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")] }
        ) { service, daemon in
            #expect(await eventually(for: .seconds(20)) { await Self.failures(daemon) >= 1 })
            let inputs = try await service.counters().inputs
            #expect(inputs == 0, "no request over a TLS the daemon did not trust")
            let said = await Self.lastError(daemon)
            #expect(!said.contains("refused the CONNECT"), "the tunnel was up; TLS failed: \(said)")
        }
        #expect(squid.entries.contains { $0.method == "CONNECT" && $0.status == 200 })
    }

    @Test(
        "EGRESS3: a proxy that asks for credentials is a 407 in one sentence, retried; a credentials file others may read is 78; with one of mode 0600, 200, and the password in no log line"
    )
    func EGRESS3_credentials() async throws {
        let password = "s3cret-Pa55"
        let squid = try await Squid(.init(credentials: ("alice", password)))
        defer { Task { await squid.stop() } }
        let file = try scratchDirectory("waf-egress").appendingPathComponent("proxy-credentials").path
        try "alice:\(password)\n".write(toFile: file, atomically: true, encoding: .utf8)

        // None: a 407, said with where the credentials go, and retried as a network failure.
        try await withDaemon(daemon: ["--egress-proxy", squid.url]) { service, daemon in
            let refused = await eventually(for: .seconds(20)) { await Self.lastError(daemon).contains("refused the CONNECT to 127.0.0.1") }
            let said = await Self.lastError(daemon)
            #expect(refused, "the failure: \(said)")
            #expect(said.contains("with 407") && said.contains("egress.proxyCredentialsFile"), "\(said)")
            #expect(await eventually(for: .seconds(20)) { await Self.failures(daemon) >= 2 }, "retried")
            let inputs = try await service.counters().inputs
            #expect(inputs == 0)
        }
        #expect(squid.entries.contains { $0.status == 407 }, "squid asked: \(squid.entries)")

        // Readable by others: refused before any request.
        chmod(file, 0o644)
        let check = try await runDetached(
            productsDirectory.appendingPathComponent("waf-tokend").path,
            [
                "--check-config", "--config", "/dev/null", "--application-integration-url", "http://127.0.0.1:9/x/", "--domain-name", "127.0.0.1",
                "--egress-proxy", squid.url, "--egress-proxy-credentials-file", file,
            ])
        #expect(check.status == 78, "\(check.stderr)")
        #expect(check.stderr.contains("has mode 0644, and it holds a password"), "\(check.stderr)")
        #expect(!check.stderr.contains(password))

        chmod(file, 0o600)
        try await withDaemon(daemon: ["--egress-proxy", squid.url, "--egress-proxy-credentials-file", file, "--log-level", "debug"]) {
            service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(20))
            #expect(try await service.counters().calls.allSatisfy { $0.from == "127.0.0.2" })
            _ = await daemon.stop()
            let basic = Data("alice:\(password)".utf8).base64EncodedString()
            for secret in [password, basic] {
                #expect(!(daemon.stderr + daemon.stdout).contains(secret), "the credentials in the daemon's log")
            }
        }
        let accepted = await squid.entries { $0.status == 200 }
        #expect(accepted.contains { $0.method == "CONNECT" && $0.user == "alice" }, "\(squid.entries)")
    }

    @Test(
        "EGRESS1: a WAF that binds tokens to addresses challenges a token fetched directly (NO_PROXY) and used through the proxy; egress.proxy set and reloaded, the canary is accepted"
    )
    func EGRESS1_addressBoundWAF() async throws {
        let squid = try await Squid()
        defer { Task { await squid.stop() } }
        // The environment as a host with a forward proxy has it, its token service listed in NO_PROXY.
        let environment = ["HTTP_PROXY": squid.url, "NO_PROXY": "127.0.0.1"]
        try await withDaemon(
            service: ["--bind-tokens-to-addresses"], daemon: ["--domain-name", "localhost", "--canary-interval-sec", "10"],
            environment: environment, configFile: "{}\n",
            naming: { ["--canary-url", "http://localhost:\(Self.port(of: $0))/protected/canary"] }
        ) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(20))
            #expect(daemon.stderr.contains("token service: direct (NO_PROXY lists 127.0.0.1)"), "the start line says why")
            // The failure: fetched from 127.0.0.1, probed from 127.0.0.2.
            #expect(
                await eventually(for: .seconds(30)) { (try? await service.counters().protectedReused) ?? 0 >= 1 },
                "the WAF saw the token from another address")
            #expect(
                await eventually(for: .seconds(20)) {
                    await Self.metrics(daemon).contains(#"waf_tokend_canary_total{provider="default",egress="\#(squid.label)",result="challenged"}"#)
                }, "the canary saw the challenge")
            #expect(await Self.canaryState(daemon) != "accepted")
            let before = try await service.counters().calls
            #expect(before.filter { $0.endpoint == "verify" }.allSatisfy { $0.from == "127.0.0.1" }, "fetched directly")
            #expect(before.filter { $0.endpoint == "protected" }.allSatisfy { $0.from == "127.0.0.2" }, "probed through squid")

            // The cure: one egress for everything, by a reload.
            try EgressReloadTests.reload(daemon, "egress:\n  proxy: \(squid.url)\n")
            let accepted = await eventually(for: .seconds(40)) { await Self.canaryState(daemon) == "accepted" }
            let state = await Self.canaryState(daemon)
            #expect(accepted, "accepted once the token comes through the same egress: \(state ?? "none")")
            let after = try await service.counters().calls
            #expect(after.last { $0.endpoint == "verify" }?.from == "127.0.0.2", "the new token fetched through squid")
            // One fetch the reload forces; the canary's new episode may add one more if its probe of
            // the old token was out as the new one came (CANARY-7: one per episode).
            let series = #"waf_tokend_token_fetches_total{provider="default",egress="\#(squid.label)",result="success"} "#
            let metrics = await Self.metrics(daemon)
            #expect(metrics.contains(series + "1") || metrics.contains(series + "2"), "\(metrics)")
        }
    }

    @Test("EGRESS3: a CONNECT squid refuses is a 502 egressRefused with its status; a token fetch's refused CONNECT, one sentence, retried")
    func EGRESS3_refused() async throws {
        let upstream = try await Self.upstream()
        let refusedPort = URL(string: upstream.origin)?.port ?? 0
        let upstreamAuthority = String(upstream.origin.dropFirst("http://".count))
        let squid = try await Squid(.init(refusedPorts: [refusedPort]))
        defer { Task { await squid.stop() } }
        let proxy = try scratchDirectory("waf-egress").appendingPathComponent("proxy.sock").path
        try await withDaemon(daemon: ["--egress-proxy", squid.url, "--proxy-listen", proxy, "--proxy-upstream", upstream.origin]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(20))
            let (code, body) = try await curl(proxy, "/refused")
            #expect(code == 502, "\(body)")
            #expect(body.contains(#""error":"egressRefused""#), "\(body)")
            #expect(body.contains("the forward proxy \(squid.label) refused the CONNECT to \(upstreamAuthority) with 403"), "\(body)")
            #expect(upstream.requests.isEmpty, "nothing went around squid")
            #expect(daemon.stderr.contains(squid.label), "the proxy's address in the log line")
        }
        // A token service behind a refused CONNECT: the status, in one sentence, retried.
        try await withDaemon(daemon: ["--egress-proxy", squid.url], naming: { _ in ["--application-integration-url", upstream.origin + "/x/"] }) {
            _, daemon in
            #expect(await eventually(for: .seconds(20)) { await Self.failures(daemon) >= 2 }, "retried")
            let said = await Self.lastError(daemon)
            #expect(
                said
                    == "the token service cannot be reached: the forward proxy \(squid.label) refused the CONNECT to 127.0.0.1:\(refusedPort) with 403",
                "\(said)")
            #expect(upstream.requests.isEmpty)
        }
    }
}
