import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFSocketAPI

/// `GET /v1/auth` on the socket's own pipeline: what nginx, Caddy, Traefik and Envoy copy onto the
/// request they forward.
@Suite("Forward authentication, on an EmbeddedChannel", .offPool)
struct AuthEndpointTests {
    static func auth(_ headers: [(String, String)] = [], query: String = "") -> String {
        "GET /v1/auth\(query) HTTP/1.1\r\n" + headers.map { "\($0): \($1)\r\n" }.joined() + "\r\n"
    }

    @Test("200 with X-Aws-Waf-Token and the request's own cookies, its aws-waf-token replaced; nothing for the body")
    func tokenAndCookies() throws {
        let socket = try EmbeddedSocket()
        let answer = try socket.exchange(Self.auth([("X-Original-URI", "/shop/cart?x=1"), ("Cookie", "session=abc; aws-waf-token=stale; lang=en")]))
        #expect(answer.statusCodes == [200])
        #expect(answer.contains("X-Aws-Waf-Token: token-1\r\n"))
        #expect(answer.contains("Cookie: session=abc; lang=en; aws-waf-token=token-1\r\n"))
        #expect(answer.contains("Content-Length: 0\r\n"))
    }

    @Test("COOK-1: the cookie only where tokenCookiePath covers the original path (X-Forwarded-Uri or X-Original-URI), dot-segments removed")
    func COOK1_pathOfTheOriginalRequest() throws {
        let configuration = try WAFConfiguration(
            applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com",
            tokenCookiePath: "/api")
        let socket = try EmbeddedSocket(configuration: configuration)
        let covered = try socket.exchange(Self.auth([("X-Forwarded-Uri", "/api/orders")]))
        #expect(covered.contains("Cookie: aws-waf-token=token-1\r\n"))
        let outside = try socket.exchange(Self.auth([("X-Forwarded-Uri", "/api/../admin"), ("Cookie", "session=abc")]))
        #expect(outside.statusCodes == [200] && outside.contains("X-Aws-Waf-Token: token-1") && outside.contains("Cookie: session=abc\r\n"))
        let hidden = try socket.exchange(Self.auth([("X-Original-URI", "/api/%2e%2e/admin")]))
        #expect(hidden.statusCodes == [200] && !hidden.contains("Cookie:"), "a path that hides a segment gets no cookie")
    }

    @Test(
        "MULTI-2: the provider by selector, else by X-Forwarded-Host (its closest parent domain), else the implicit one; 403 for one the peer may not use"
    )
    func MULTI2_providerChoice() throws {
        let socket = try EmbeddedSocket(pay: true)
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "api.pay.example.com:8443")])).contains("X-Aws-Waf-Token: token-2"))
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "shop.example.com")])).contains("X-Aws-Waf-Token: token-1"))
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "elsewhere.org")])).contains("X-Aws-Waf-Token: token-1"), "not covered: default")
        #expect(try socket.exchange(Self.auth(query: "?provider=pay")).contains("X-Aws-Waf-Token: token-2"))
        let refused = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"])
        let answer = try refused.exchange(Self.auth([("X-Forwarded-Host", "pay.example.com")]))
        #expect(answer.statusCodes == [403] && !answer.contains("token-2"))
    }

    @Test("without a token it waits auth.tokenWaitSec, then 503 with Retry-After")
    func waitsThenUnavailable() throws {
        let socket = try EmbeddedSocket(tokenFirst: false)
        socket.api.endpointOptions.authTokenWait = .seconds(2)
        #expect(try socket.exchange(Self.auth()).isEmpty, "waiting")
        socket.channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        let answer = try socket.written()
        #expect(answer.statusCodes == [503] && answer.contains("Retry-After: 1"))
    }
}
