import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import Testing
import WAFChallenge
import WAFJSON
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits

/// The token-injecting proxy against real processes: the local token service's protected resource
/// is the upstream, with tokens that expire after 2 s, so that challenges come during the tests.
@Suite("Token-injecting proxy", .offPool, .serialized)
struct ProxyTests {
    static let immunity = ["--immunity-seconds", "2"]

    static func proxy(_ service: ServiceProcess, _ extra: [String] = []) -> [String] {
        ["--proxy-upstream", service.origin, "--log-level", "debug"] + extra
    }

    /// A local token service and a daemon whose proxy listens on a Unix socket in front of it.
    static func withProxy(
        service: [String] = immunity, _ extra: [String] = [], _ body: (ServiceProcess, DaemonProcess, String) async throws -> Void
    ) async throws {
        let socket = try scratchDirectory("waf-proxy").appendingPathComponent("proxy.sock").path
        try await withDaemon(
            service: service, daemon: ["--proxy-listen", socket, "--log-level", "debug"] + extra,
            naming: { extra.contains("--proxy-upstream") ? [] : ["--proxy-upstream", $0.origin] }
        ) { service, daemon in
            try await body(service, daemon, socket)
        }
    }

    static func proxyStatus(_ daemon: DaemonProcess) async throws -> JSONValue {
        try #require(try await status(daemon)["proxy"])
    }

    static func number(_ value: JSONValue?) -> Int { value?.integer ?? -1 }

    @Test("curl, knowing nothing of tokens, gets 200 across token expiries; each challenge is one refresh and one replay")
    func curlAcrossExpiries() async throws {
        try await Self.withProxy { service, daemon, socket in
            // Requests every 200 ms until two tokens have expired under them (a loaded machine
            // takes longer; the deadline only bounds a broken proxy).
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(60)
            var answers = 0
            while try await service.counters().protectedChallenged < 2, clock.now < deadline {
                let (code, body) = try await curl(socket, "/protected/hello")
                #expect(code == 200, "\(body)")
                answers += 1
                try await Task.sleep(for: .milliseconds(200))
            }
            let counters = try await service.counters()
            let proxy = try await Self.proxyStatus(daemon)
            // Each expiry answered by a replay, none passed on.
            #expect(counters.protectedChallenged >= 2)
            #expect(Self.number(proxy["challenges"]) == counters.protectedChallenged)
            #expect(Self.number(proxy["replays"]) == counters.protectedChallenged)
            #expect(Self.number(proxy["requests"]) == answers)
            #expect(counters.tokensIssued == 1 + counters.protectedChallenged, "the first token, then one per challenge")
        }
    }

    @Test("16 requests challenged together join one refresh and replay once each")
    func concurrentChallengesJoinOneRefresh() async throws {
        try await Self.withProxy { service, daemon, socket in
            #expect(try await curl(socket, "/protected/warm").code == 200)
            try await Task.sleep(for: .milliseconds(2300))  // the token has expired at the upstream
            // A slow token service: every request is challenged while the one refresh is under way.
            try await service.setLatency(milliseconds: 600)
            let before = try await service.counters()
            let codes = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<16 { group.addTask { try await curl(socket, "/protected/\(index)").code } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(codes == Array(repeating: 200, count: 16))
            let after = try await service.counters()
            #expect(after.tokensIssued - before.tokensIssued == 1, "one joined refresh")
            // A curl that a loaded machine starts after the refresh has ended brings the new token
            // and is not challenged; every challenged one is replayed once.
            let challenged = after.protectedChallenged - before.protectedChallenged
            #expect(challenged >= 2, "requests challenged together")
            let proxy = try await Self.proxyStatus(daemon)
            #expect(Self.number(proxy["replays"]) == challenged)
            #expect(Self.number(proxy["challenges"]) == challenged)
        }
    }

    @Test("a Swift HTTP client gets 200 through the proxy across an expiry")
    func swiftClient() async throws {
        try await Self.withProxy { _, _, socket in
            let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)
            defer { Task { try? await client.shutdown() } }
            let encoded = socket.addingPercentEncoding(withAllowedCharacters: .urlHostAllowed)!
            for round in 0..<2 {
                for index in 0..<5 {
                    let response = try await client.execute(
                        HTTPClientRequest(url: "http+unix://\(encoded)/protected/swift-\(index)"), timeout: .seconds(10))
                    _ = try await response.body.collect(upTo: 1 << 20)
                    #expect(response.status == .ok, "round \(round), request \(index)")
                }
                try await Task.sleep(for: .milliseconds(2300))
            }
        }
    }

    @Test("a body within the replay buffer is replayed after a challenge; a larger one streams whole and is not replayed")
    func bodies() async throws {
        try await Self.withProxy(service: Self.immunity, ["--proxy-replay-buffer-bytes", "65536"]) { service, daemon, socket in
            let directory = try scratchDirectory("waf-proxy-body")
            func post(_ bytes: Int) async throws -> (code: Int, body: String, sha: String) {
                let data = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 31) })
                let file = directory.appendingPathComponent("body-\(bytes)")
                try data.write(to: file)
                let digest = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
                let (code, body) = try await curl(
                    socket, "/protected/upload", ["--data-binary", "@\(file.path)", "-H", "Content-Type: application/octet-stream"])
                return (code, body, digest)
            }
            let large = 1 << 20
            // With a token minted just before: tokens live 2 s here, and on a loaded machine the
            // daemon's first one can be older than that by now (a streamed body is not replayed).
            var fresh = (code: 0, body: "", sha: "")
            for _ in 1...3 where fresh.code != 200 {
                _ = try await run("/usr/bin/curl", ["-s", "-X", "POST", "--unix-socket", daemon.socketPath, "http://localhost/v1/refresh?wait=10"])
                fresh = try await post(large)
            }
            #expect(fresh.code == 200)
            #expect(json(fresh.body)?["bodyBytes"]?.string == String(large))
            #expect(json(fresh.body)?["bodySHA256"]?.string == fresh.sha)

            try await Task.sleep(for: .milliseconds(2300))
            let replaysBefore = Self.number(try await Self.proxyStatus(daemon)["replays"])
            let challenged = try await post(large)
            #expect(challenged.code == 202, "passed on as the upstream sent it")
            #expect(challenged.body == "challenge\n")
            #expect(Self.number(try await Self.proxyStatus(daemon)["replays"]) == replaysBefore)

            try await Task.sleep(for: .milliseconds(2300))
            let small = try await post(4096)
            #expect(small.code == 200, "replayed with a new token")
            #expect(json(small.body)?["bodySHA256"]?.string == small.sha)
            #expect(Self.number(try await Self.proxyStatus(daemon)["replays"]) == replaysBefore + 1)
            _ = service
        }
    }

    @Test("an upstream that is down, resets or stalls gives 502 or 504 with a JSON error, and the daemon stays healthy")
    func upstreamFailures() async throws {
        try await Self.withProxy(service: [], ["--proxy-upstream-timeout-sec", "1"]) { service, daemon, socket in
            // The first proxied request: a new upstream connection, so no second try on another.
            try await service.arm(FaultRule(kind: .drop, target: .protected, count: 1))
            let reset = try await curl(socket, "/protected/reset")
            #expect(reset.code == 502)
            #expect(json(reset.body)?["error"]?.string == "upstreamClosed")

            try await service.arm(FaultRule(kind: .stall, target: .protected, count: 1))
            let clock = ContinuousClock()
            let started = clock.now
            let stalled = try await curl(socket, "/protected/stall")
            #expect(stalled.code == 504)
            #expect(json(stalled.body)?["error"]?.string == "upstreamTimeout")
            #expect(clock.now - started < .seconds(5))

            #expect(try await curl(socket, "/protected/after").code == 200)
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
            #expect(Self.number(try await Self.proxyStatus(daemon)["upstreamErrors"]) >= 2)
        }
        // Nothing listens on port 1.
        try await Self.withProxy(service: [], ["--proxy-upstream", "http://127.0.0.1:1/"]) { _, daemon, socket in
            let down = try await curl(socket, "/protected/x")
            #expect(down.code == 502)
            #expect(json(down.body)?["error"]?.string == "upstreamUnreachable")
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
        }
    }

    @Test("a Host header or an absolute URL naming another host still goes to the configured upstream; CONNECT gets 405")
    func neverAnOpenProxy() async throws {
        try await Self.withProxy(service: []) { service, _, socket in
            let absolute = try await curl(socket, "/", ["--request-target", "http://evil.example:9/protected/abs", "-H", "Host: evil.example"])
            #expect(absolute.code == 200)
            #expect(json(absolute.body)?["path"]?.string == "/protected/abs")
            let connect = try await curl(socket, "/", ["-X", "CONNECT", "--request-target", "evil.example:443"])
            #expect(connect.code == 405)
            #expect(try await service.counters().protectedAllowed == 1)
        }
    }

    @Test("a request head with bare LF line ends gets 400 from the proxy and the socket, even cut at its version, and nothing reaches the upstream")
    func bareLineFeedIsMalformed() async throws {
        try await Self.withProxy(service: []) { service, daemon, socket in
            for path in [socket, daemon.socketPath] {
                for request in ["GET /protected/x HTTP/1.1\nHost: x\n\n", "GET /protected/x HTTP/1.1\r\nHost: x\n\n"] {
                    for cut in [request.utf8.count, "GET /protected/x HTTP/1.1".utf8.count] {
                        let client = try RawSocket(path: path)
                        let bytes = Array(request.utf8)
                        client.send(Array(bytes[..<cut]))
                        if cut < bytes.count {
                            try await Task.sleep(for: .milliseconds(50))
                            client.send(Array(bytes[cut...]))
                        }
                        let answer = client.response(timeout: .seconds(5))
                        #expect(answer.status == 400, "\(path) \(request.debugDescription) cut at \(cut): \(answer.text)")
                    }
                }
            }
            #expect(try await service.counters().protectedAllowed + service.counters().protectedChallenged == 0)
        }
    }

    @Test("a peer outside proxy.allowedUsers gets 403, on a Unix socket and on a loopback port")
    func peerCheck() async throws {
        try await Self.withProxy(service: [], ["--proxy-allowed-users", "65534"]) { service, _, socket in
            let refused = try await curl(socket, "/protected/x")
            #expect(refused.code == 403)
            #expect(json(refused.body)?["error"]?.string == "forbidden")
            #expect(try await service.counters().protectedAllowed + service.counters().protectedChallenged == 0)
        }
        let directory = try scratchDirectory("waf-proxy-tcp")
        try await withDaemon(service: []) { service, _ in
            for (users, expected) in [("65534", 403), (String(getuid()), 200)] {
                let daemon = try DaemonProcess(
                    service: service, arguments: Self.proxy(service, ["--proxy-listen", "127.0.0.1:0", "--proxy-allowed-users", users]),
                    directory: directory.appendingPathComponent(users))
                try await daemon.waitUntilServing()
                let address = try #require(try await Self.proxyStatus(daemon)["listen"]?.string)
                let result = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://\(address)/protected/tcp"])
                #expect(result.stdout == String(expected), "allowed \(users)")
                await daemon.stop()
            }
        }
    }

    @Test("tokenIn header, a reload that changes it, a reload that turns the proxy off; waf-tokenctl shows the proxy")
    func reload() async throws {
        let directory = try scratchDirectory("waf-proxy-reload")
        let socket = directory.appendingPathComponent("proxy.sock").path
        try await withDaemon(service: []) { service, _ in
            func config(_ proxy: String) -> String {
                "applicationIntegrationUrl: \(service.url)\ndomainName: 127.0.0.1\nsocket:\n  path: \(directory.path)/token.sock\n\(proxy)"
            }
            let file = directory.appendingPathComponent("waf-tokend.yaml")
            try config("proxy:\n  listen: \(socket)\n  upstream: \(service.origin)\n  tokenIn: header\n").write(
                to: file, atomically: true, encoding: .utf8)
            let daemon = try DaemonProcess(service: nil, replacing: ["--config", file.path, "--refresh-jitter", "false"], directory: directory)
            try await daemon.waitUntilServing()
            #expect(try await curl(socket, "/protected/header").code == 200)
            #expect(try await Self.proxyStatus(daemon)["tokenIn"]?.string == "header")
            let ctl = try await run(productsDirectory.appendingPathComponent("waf-tokenctl").path, ["--socket", daemon.socketPath, "status"])
            #expect(ctl.stdout.contains("proxy:     \(socket) -> \(service.origin)/ (token in header)"), "\(ctl.stdout)")

            try config("proxy:\n  listen: \(socket)\n  upstream: \(service.origin)\n  tokenIn: cookie\n").write(
                to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await eventually { (try? await Self.proxyStatus(daemon))?["tokenIn"]?.string == "cookie" })
            #expect(try await curl(socket, "/protected/cookie").code == 200)

            try config("").write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await eventually { (try? await status(daemon))?["proxy"] == .null })
            #expect(!FileManager.default.fileExists(atPath: socket))
            let off = try await run(productsDirectory.appendingPathComponent("waf-tokenctl").path, ["--socket", daemon.socketPath, "status"])
            #expect(off.stdout.contains("proxy:     off"))
            await daemon.stop()
        }
    }

    @Test("a request waits for the first token; a stop lets a request in flight finish")
    func firstTokenAndGracefulStop() async throws {
        try await Self.withProxy(service: ["--latency-ms", "800"]) { service, daemon, socket in
            // The daemon started with no token: the first request waits for it (proxy.tokenWaitSec).
            #expect(try await curl(socket, "/protected/first").code == 200)
            async let slow = curl(socket, "/protected/slow?delayMs=1500")
            // The upstream has the request (it counts it before its delay): it is in flight.
            #expect(await eventually { (try? await service.counters().protectedAllowed) == 2 }, "the slow request reached the upstream")
            daemon.signal(SIGTERM)
            let (code, _) = try await slow
            #expect(code == 200, "finished within the stop's grace")
            #expect(await daemon.waitForExit() == 0)
        }
    }
}
