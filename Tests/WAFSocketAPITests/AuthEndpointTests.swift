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
        "MULTI-2: the provider by selector, else (auth.selectByForwardedHost) by X-Forwarded-Host (its closest parent domain among those the peer may use), else the implicit one"
    )
    func MULTI2_providerChoice() throws {
        let socket = try EmbeddedSocket(pay: true)
        socket.api.endpointOptions.selectByForwardedHost = true
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "api.pay.example.com:8443")])).contains("X-Aws-Waf-Token: token-2"))
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "shop.example.com")])).contains("X-Aws-Waf-Token: token-1"))
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "elsewhere.org")])).contains("X-Aws-Waf-Token: token-1"), "not covered: default")
        #expect(try socket.exchange(Self.auth(query: "?provider=pay")).contains("X-Aws-Waf-Token: token-2"))
        let refused = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"])
        refused.api.endpointOptions.selectByForwardedHost = true
        // A provider the peer may not use is not chosen by its host: the implicit one answers (TENANT-7).
        let answer = try refused.exchange(Self.auth([("X-Forwarded-Host", "pay.example.com")]))
        #expect(answer.statusCodes == [200] && answer.contains("token-1") && !answer.contains("token-2"))
    }

    /// What a client may have written itself, passed on by the proxy with its own headers.
    static let ambiguous: [String] = [
        auth([("X-Original-URI", "/admin"), ("X-Forwarded-Uri", "/api/x")]),
        auth([("X-Forwarded-Uri", "/x"), ("X-Original-URI", "/y"), ("X-Forwarded-Uri", "/z")]),
        auth([("X-Forwarded-Uri", "/api/x"), ("X-Forwarded-Uri", "/admin")]),
        auth([("X-Original-URI", "/api/x"), ("X-Original-URI", "/admin")]),
        auth([("X-Forwarded-Host", "pay.example.com"), ("X-Forwarded-Host", "shop.example.com")]),
        auth([("X-Forwarded-Host", "elsewhere.org, pay.example.com")]),
    ]

    @Test(
        "TENANT13: URI headers that disagree, or a forwarding header given twice with different values, get 400 and no token (the fast path leaves them to the codec)"
    )
    func TENANT13_ambiguousForwardingHeaders() throws {
        for request in Self.ambiguous {
            for viaCodec in [false, true] {
                let socket = try EmbeddedSocket(pay: true)
                socket.api.endpointOptions.selectByForwardedHost = true
                let sent = viaCodec ? request.replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: keep-alive\r\n\r\n") : request
                let answer = try socket.exchange(sent)
                #expect(answer.statusCodes == [400] && !answer.contains("token-"), "\(request): \(answer)")
            }
        }
        // The same header twice with the same value, or both URI headers agreeing, is one request;
        // a URI's own commas are not a list. Both paths answer alike.
        for request in [
            Self.auth([("X-Original-URI", "/api/x"), ("X-Forwarded-Uri", "/api/x"), ("X-Original-URI", "/api/x")]),
            Self.auth([("X-Original-URI", "/search?tags=a,b")]), Self.auth([("X-Forwarded-Uri", "/search?tags=a,b")]),
        ] {
            for viaCodec in [false, true] {
                let socket = try EmbeddedSocket()
                let sent = viaCodec ? request.replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: keep-alive\r\n\r\n") : request
                let answer = try socket.exchange(sent)
                #expect(answer.statusCodes == [200] && answer.contains("X-Aws-Waf-Token: token-1"), "\(request): \(answer)")
            }
        }
    }

    @Test("TENANT13: X-Forwarded-Host chooses no provider unless auth.selectByForwardedHost; the auth URL's selector always wins")
    func TENANT13_forwardedHostChoosesNothingByDefault() throws {
        let socket = try EmbeddedSocket(pay: true)
        for path in [false, true] {
            let keepAlive = path ? [("Connection", "keep-alive")] : []
            let answer = try socket.exchange(Self.auth([("X-Forwarded-Host", "api.pay.example.com")] + keepAlive))
            #expect(answer.contains("X-Aws-Waf-Token: token-1") && !answer.contains("token-2"), "the implicit provider: \(answer)")
        }
        socket.api.endpointOptions.selectByForwardedHost = true
        let pinned = try socket.exchange(Self.auth([("X-Forwarded-Host", "api.pay.example.com")], query: "?provider=default"))
        #expect(pinned.contains("X-Aws-Waf-Token: token-1") && !pinned.contains("token-2"), "the selector wins")
        #expect(try socket.exchange(Self.auth([("X-Forwarded-Host", "api.pay.example.com")])).contains("X-Aws-Waf-Token: token-2"))
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

/// The fast path's `/v1/auth` against the codec's, request by request.
@Suite("Forward authentication on the fast path", .offPool)
struct AuthFastPathTests {
    static let requests: [String] = [
        AuthEndpointTests.auth(),
        AuthEndpointTests.auth([("X-Original-URI", "/shop/cart?x=1"), ("Cookie", "session=abc; aws-waf-token=stale; lang=en")]),
        AuthEndpointTests.auth([("Cookie", "a=1"), ("X-Forwarded-Uri", " /api/../admin "), ("Cookie", "b=2")]),
        AuthEndpointTests.auth([("X-Forwarded-Host", "api.pay.example.com:8443")]),
        AuthEndpointTests.auth(query: "?provider=pay"),
        AuthEndpointTests.auth([("X-Forwarded-Host", "pay.example.com")], query: "?domain=shop.example.com"),
    ]

    /// Without its Date line, which may differ by a second.
    static func dateless(_ answer: String) -> String {
        answer.split(separator: "\r\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("Date: ") }.joined(separator: "\r\n")
    }

    static func fastPath(_ socket: EmbeddedSocket) throws -> TokenFastPathHandler {
        try socket.channel.pipeline.syncOperations.handler(type: TokenFastPathHandler.self)
    }

    @Test("each request gets from the fast path what the codec gives it, and the connection stays off the codec")
    func sameAsTheCodec() throws {
        for request in Self.requests {
            let fast = try EmbeddedSocket(pay: true)
            let answer = try fast.exchange(request)
            #expect(try !Self.fastPath(fast).codec, "answered on the fast path: \(request)")
            // `Connection: keep-alive` changes nothing in the answer, and sends the request to the codec.
            let slow = try EmbeddedSocket(pay: true)
            let viaCodec = try slow.exchange(request.replacingOccurrences(of: "\r\n\r\n", with: "\r\nConnection: keep-alive\r\n\r\n"))
            #expect(try Self.fastPath(slow).codec)
            #expect(Self.dateless(answer) == Self.dateless(viaCodec), "\(request)")
        }
    }

    @Test("split at every byte and pipelined, the answers are those of the requests one by one; a new cookie, a new answer")
    func splitAndPipelined() throws {
        let all = Self.requests.joined()
        let expected = try Self.requests.map { try EmbeddedSocket(pay: true).exchange($0) }.map(Self.dateless).joined()
        for split in stride(from: 1, to: all.utf8.count, by: 7) {
            let socket = try EmbeddedSocket(pay: true)
            #expect(Self.dateless(try socket.exchange(all, splits: Array(stride(from: split, to: all.utf8.count, by: split)))) == expected)
        }
        let socket = try EmbeddedSocket()
        let first = try socket.exchange(AuthEndpointTests.auth([("Cookie", "a=1")]))
        let second = try socket.exchange(AuthEndpointTests.auth([("Cookie", "a=2")]))
        #expect(first.contains("Cookie: a=1; aws-waf-token=token-1") && second.contains("Cookie: a=2; aws-waf-token=token-1"))
    }

    @Test("no token yet, or a provider the peer may not use: the codec answers (it waits; 403)")
    func leftToTheCodec() throws {
        let waiting = try EmbeddedSocket(tokenFirst: false)
        #expect(try waiting.exchange(AuthEndpointTests.auth()).isEmpty)
        #expect(try Self.fastPath(waiting).codec)
        let refused = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"])
        #expect(try refused.exchange(AuthEndpointTests.auth(query: "?provider=pay")).statusCodes == [403])
        #expect(try Self.fastPath(refused).codec)
    }
}
