import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// The proxy's edges over real sockets: a body that drips (TENANT-6), dot-segments (TENANT-8), an
/// answer with two framings (TENANT-9).
@Suite("Tenants: the proxy's edges", .offPool, .timeLimit(.minutes(2)))
struct TenantProxyTests {
    static let script: @Sendable (String) -> ScriptedUpstream.Reply = { path in
        switch path {
        case "/base/both": .init("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        default: .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
    }

    /// A daemon whose proxy forwards to a scripted upstream below `/base`, the cookie for `/base/api`.
    static func withProxy(_ arguments: [String] = [], _ body: (ScriptedUpstream, String) async throws -> Void) async throws {
        let upstream = try await ScriptedUpstream(script)
        let socket = try scratchDirectory("waf-tenant-proxy").appendingPathComponent("proxy.sock").path
        do {
            let proxy = ["--proxy-listen", socket, "--proxy-upstream", upstream.origin + "/base/", "--token-cookie-path", "/base/api"]
            try await withDaemon(daemon: proxy + arguments) { _, daemon in
                _ = try await daemon.client.tokenReady(wait: .seconds(10))
                #expect(await eventually { (try? RawSocket(path: socket)) != nil }, "the proxy's socket takes connections")
                try await body(upstream, socket)
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test("TENANT8: dot-segments are removed before COOK-1 and the base path; encoded ones are refused and reach nothing")
    func TENANT8_dotSegments() async throws {
        try await Self.withProxy { upstream, socket in
            for (path, expected) in [
                ("/api/../admin", "/base/admin"), ("/api/./x", "/base/api/x"), ("/../../etc", "/base/etc"), ("/api/x/..", "/base/api/"),
            ] {
                let client = try RawSocket(path: socket)
                _ = client.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(client.nextResponse(timeout: .seconds(10))?.status == 200, "\(path)")
                let sent = try #require(upstream.requests.last)
                #expect(sent.path == expected, "\(path) went to \(sent.path)")
                #expect(sent.header("cookie").isEmpty == !expected.hasPrefix("/base/api"), "\(path): cookie \(sent.header("cookie"))")
            }
            let count = upstream.requests.count
            for path in ["/api/%2e%2e/admin", "/api/%2E./admin", "/api/.%2e/admin", "/api%2f..%2fadmin", "/api/..%5cadmin", "/api\\..\\admin"] {
                let client = try RawSocket(path: socket)
                _ = client.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                let answer = client.response(timeout: .seconds(10))
                #expect(answer.status == 400 && answer.closed, "\(path): \(answer.text)")
            }
            #expect(upstream.requests.count == count, "nothing encoded reached the upstream")
        }
    }

    @Test("TENANT9: an answer with both Content-Length and Transfer-Encoding reaches the client chunked, without the length")
    func TENANT9_oneFraming() async throws {
        try await Self.withProxy { _, socket in
            let client = try RawSocket(path: socket)
            _ = client.send("GET /both HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
            let (bytes, _) = client.receive(timeout: .seconds(3))
            var answers = Answers(bytes: bytes)
            let both = answers.next()
            #expect(
                both?.body == "hello" && both?.headers["transfer-encoding"] == ["chunked"] && both?.headers["content-length"] == nil,
                "\(both.debugDescription)")
            #expect(answers.next()?.body == "ok", "the next answer reads where the first ended")
        }
    }

    @Test("TENANT6: a proxy request whose body drips is cut by socket.requestTimeoutSec: 408 and close")
    func TENANT6_drippingBody() async throws {
        try await Self.withProxy(["--socket-request-timeout-sec", "2"]) { upstream, socket in
            let client = try RawSocket(path: socket)
            _ = client.send("POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
            let started = ContinuousClock.now
            var answer: (status: Int?, text: String, closed: Bool) = (nil, "", false)
            while answer.status == nil, ContinuousClock.now - started < .seconds(15) {
                _ = client.send("x")
                answer = client.response(timeout: .milliseconds(500))
            }
            #expect(answer.status == 408, "\(answer.text)")
            #expect(ContinuousClock.now - started < .seconds(10), "cut within the request timeout, not after")
            #expect(upstream.requests.filter { $0.path == "/base/api/x" }.allSatisfy { $0.body.count < 100 })
        }
    }
}
