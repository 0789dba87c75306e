import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration
@testable import WAFHTTPWire
@testable import WAFTokenProxy

/// The proxy's decisions, without I/O.
@Suite("Proxy rules", .offPool)
struct ProxyRulesTests {
    static let upstream = try! UpstreamTarget.parse("https://api.example.com/base/", domainName: "example.com").get()

    static func head(_ uri: String, _ headers: [(String, String)] = [], method: String = "GET") -> HTTPHead {
        try! HTTPHeadParser.request(ByteBuffer(string: "\(method) \(uri) HTTP/1.1\r\n" + headers.map { "\($0): \($1)\r\n" }.joined() + "\r\n"))
    }

    /// A head's fields by name, any case, as a test reads them.
    struct Fields {
        let head: HTTPHead
        var names: [String] { head.fields.map { head.string($0.name).lowercased() } }
        subscript(_ name: String) -> [String] {
            head.fields.filter { head.string($0.name).lowercased() == name.lowercased() }.map { head.string($0.value) }
        }
    }

    /// What goes upstream for `head`, parsed back.
    static func forward(
        _ head: HTTPHead, token: String? = "T2", placement: ProxySettings.TokenPlacement = .cookie, cookiePath: String = "/",
        framing: ProxyRules.Framing = .none
    ) -> (target: String, headers: Fields) {
        var bytes = ByteBuffer()
        let target = try! ProxyRules.upstreamTarget(for: head, upstream: upstream).get()
        ProxyRules.writeUpstreamHead(
            head, target: target, upstream: upstream, token: token, placement: placement,
            cookieApplies: { path in WAFCookie.pathMatches(requestPath: path, cookiePath: cookiePath) }, framing: framing, into: &bytes)
        let sent = try! HTTPHeadParser.request(bytes)
        return (sent.target, Fields(head: sent))
    }

    static func answer(_ status: String, _ headers: [(String, String)]) -> HTTPHead {
        try! HTTPHeadParser.response(ByteBuffer(string: "HTTP/1.1 \(status)\r\n" + headers.map { "\($0): \($1)\r\n" }.joined() + "\r\n"))
    }

    @Test("paths go below the upstream's path; an absolute-form target or a Host header never picks the host")
    func targets() {
        #expect(Self.upstream.target(for: "/x?q=1") == "/base/x?q=1")
        #expect(Self.upstream.target(for: "/") == "/base/")
        #expect(Self.upstream.target(for: "http://evil.example:8080/steal?a=b") == "/base/steal?a=b")
        #expect(Self.upstream.target(for: "http://evil.example") == "/base/")
        #expect(Self.upstream.target(for: "*") == "/base/*")
        let sent = Self.forward(Self.head("http://evil.example/x", [("Host", "evil.example")]))
        #expect(sent.headers["Host"] == ["api.example.com"])
        #expect(sent.target == "/base/x")
    }

    @Test("the token replaces a client's aws-waf-token cookie; the client's other cookies stay")
    func cookieMerge() {
        let sent = Self.forward(Self.head("/x", [("Cookie", "a=1; aws-waf-token=OLD; b=2")]))
        #expect(sent.headers["cookie"] == ["a=1; b=2; aws-waf-token=T2"])
        let none = Self.forward(Self.head("/x"))
        #expect(none.headers["cookie"] == ["aws-waf-token=T2"])
        // COOK-1: outside tokenCookiePath no cookie is added, and the client's stays as it was.
        let outside = Self.forward(Self.head("/x", [("Cookie", "aws-waf-token=MINE")]), cookiePath: "/api")
        #expect(outside.headers["cookie"] == ["aws-waf-token=MINE"])
        // No token yet: the request goes as the client sent it.
        #expect(Self.forward(Self.head("/x", [("Cookie", "a=1")]), token: nil).headers["cookie"] == ["a=1"])
    }

    @Test("tokenIn header: x-aws-waf-token on every request, replacing the client's")
    func headerPlacement() {
        let sent = Self.forward(Self.head("/x", [("x-aws-waf-token", "OLD"), ("Cookie", "a=1")]), placement: .header)
        #expect(sent.headers["x-aws-waf-token"] == ["T2"])
        #expect(sent.headers["cookie"] == ["a=1"])
    }

    @Test("each name of the hop-by-hop list stays behind in any case, and no other name of the same length")
    func hopByHopList() {
        let decoys = ["ab", "accepts", "x-forward1", "x-proxy-connecti", "transfer-encodinx", "proxy-authenticatx", "proxy-authorizatiox"]
        for hop in ProxyRules.hopByHop.map({ "\($0)" }) {
            for name in [hop, hop.uppercased(), hop.prefix(1).uppercased() + hop.dropFirst()] {
                let client = Self.forward(Self.head("/x", [(name, "v"), ("Accept", "*/*")]))
                #expect(!client.headers.names.contains(hop) && client.headers["accept"] == ["*/*"], "\(name)")
                var bytes = ByteBuffer()
                ProxyRules.writeClientHead(
                    Self.answer("200 OK", [(name, "v")]), framing: .none, clientFraming: .asUpstream, keepAlive: true, into: &bytes)
                #expect(!Fields(head: try! HTTPHeadParser.response(bytes)).names.contains(hop), "\(name)")
            }
        }
        for decoy in decoys {
            #expect(Self.forward(Self.head("/x", [(decoy, "v")])).headers[decoy] == ["v"], "\(decoy)")
        }
    }

    @Test("the name bits written as constants are those of the names they stand for")
    func dropBits() {
        let hop = ProxyRules.hopByHop.reduce(UInt64(0)) { $0 | HTTPHead.nameBit($1) }
        #expect(ProxyRules.hopByHopBits == hop)
        let upstream: [StaticString] = ["content-length", "host", "expect", "cookie", "x-aws-waf-token"]
        #expect(ProxyRules.upstreamDropBits == upstream.reduce(hop) { $0 | HTTPHead.nameBit($1) })
        #expect(ProxyRules.clientDropBits == hop | HTTPHead.nameBit("content-length"))
    }

    @Test("a head that outgrows the room counted for it is written again with more, whole, after what the buffer held")
    func headOutgrowingItsBound() {
        var buffer = ByteBuffer(string: "before;")
        let piece = String(repeating: "x", count: 1_000)
        HeadBytes.write(into: &buffer, bound: 1) { out in
            for _ in 0..<10 { out.append(piece) }
            out.append("\r\n")
        }
        #expect(String(buffer: buffer) == "before;" + String(repeating: piece, count: 10) + "\r\n")
    }

    @Test("a head written into a spare uses its storage only when nothing else holds it and it is no larger than a new buffer's")
    func headIntoASpare() {
        func address(_ buffer: ByteBuffer) -> UnsafeRawPointer? { buffer.withUnsafeReadableBytes { $0.baseAddress.map(UnsafeRawPointer.init) } }
        func write(_ text: String, into buffer: inout ByteBuffer) {
            buffer.moveReaderIndex(to: buffer.writerIndex)
            HeadBytes.write(into: &buffer, bound: 600) { $0.append(text) }
        }
        // Unique, of the head's size (a new one would be 1,024 bytes): written in place.
        var spare = ByteBufferAllocator().buffer(capacity: 1_024)
        spare.writeString("old head")
        let storage = address(spare)
        write("new head", into: &spare)
        #expect(String(buffer: spare) == "new head" && address(spare) == storage && spare.capacity == 1_024)
        // Held by a queue: the queued head keeps its bytes, the next one has storage of its own.
        let queued = spare
        write("next head", into: &spare)
        #expect(String(buffer: queued) == "new head" && String(buffer: spare) == "next head" && address(spare) != storage)
        #expect(spare.capacity == 1_024, "the size a new buffer would have")
        // Larger than a new one would be: let go, for one of the head's size.
        var large = ByteBufferAllocator().buffer(capacity: 4_096)
        write("small head", into: &large)
        #expect(String(buffer: large) == "small head" && large.capacity == 1_024)
    }

    @Test("a head of long fields, cookies to merge and a length is written whole, byte for byte")
    func longHeadWhole() {
        let long = String(repeating: "v", count: 20_000)
        let head = Self.head(
            "/x?" + long, [("Cookie", "a=\(long)"), ("X-Long", long), ("Cookie", "aws-waf-token=OLD; b=\(long)"), ("Content-Length", "12")],
            method: "POST")
        let token = String(repeating: "T", count: 4_000)
        var bytes = ByteBuffer()
        let target = try! ProxyRules.upstreamTarget(for: head, upstream: Self.upstream).get()
        ProxyRules.writeUpstreamHead(
            head, target: target, upstream: Self.upstream, token: token, placement: .cookie, cookieApplies: { _ in true },
            framing: .length(12), into: &bytes)
        let expected =
            "POST /base/x?\(long) HTTP/1.1\r\nX-Long: \(long)\r\nHost: api.example.com\r\n"
            + "Cookie: a=\(long); b=\(long); aws-waf-token=\(token)\r\nContent-Length: 12\r\nVia: 1.1 waf-tokend\r\n\r\n"
        #expect(String(buffer: bytes) == expected)
    }

    @Test("hop-by-hop headers stay behind, with every header the Connection header names (RFC 9110 §7.6.1)")
    func hopByHop() {
        let sent = Self.forward(
            Self.head(
                "/x",
                [
                    ("Connection", "keep-alive, X-Secret"), ("Keep-Alive", "timeout=5"), ("X-Secret", "s"), ("TE", "trailers"),
                    ("Upgrade", "websocket"), ("Proxy-Authorization", "Basic x"), ("Transfer-Encoding", "chunked"), ("Accept", "*/*"),
                ]), framing: .chunked)
        let names = Set(sent.headers.names)
        #expect(names.isDisjoint(with: ["connection", "keep-alive", "x-secret", "te", "upgrade", "proxy-authorization"]))
        #expect(sent.headers["accept"] == ["*/*"])
        #expect(sent.headers["transfer-encoding"] == ["chunked"])
        #expect(sent.headers["via"] == ["1.1 waf-tokend"])
        var bytes = ByteBuffer()
        let upstreamAnswer = Self.answer("200 OK", [("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Content-Length", "3")])
        ProxyRules.writeClientHead(upstreamAnswer, framing: .length(3), clientFraming: .asUpstream, keepAlive: true, into: &bytes)
        let answer = Fields(head: try! HTTPHeadParser.response(bytes))
        #expect(answer["x-hop"].isEmpty)
        #expect(answer["connection"].isEmpty)
        #expect(answer["content-length"] == ["3"])
        #expect(answer["via"] == ["1.1 waf-tokend"])
    }

    @Test("a kept body goes with its length; a streamed one as the client framed it")
    func framing() {
        #expect(Self.forward(Self.head("/x", [("Content-Length", "999")], method: "POST"), framing: .length(5)).headers["content-length"] == ["5"])
        #expect(Self.forward(Self.head("/x", [("Content-Length", "0")], method: "POST")).headers["content-length"] == ["0"])
        #expect(Self.forward(Self.head("/x")).headers["content-length"].isEmpty)
        #expect(Self.forward(Self.head("/x", [("Content-Length", "00")], method: "POST")).headers["content-length"].isEmpty)
        #expect(ProxyRules.bodyPlan(.none, replayBufferBytes: 10) == .none)
        #expect(ProxyRules.bodyPlan(.length(10), replayBufferBytes: 10) == .buffer)
        #expect(ProxyRules.bodyPlan(.length(11), replayBufferBytes: 10) == .stream)
        #expect(ProxyRules.bodyPlan(.chunked, replayBufferBytes: 10) == .buffer)
    }

    @Test("a challenge is a 202 with x-amzn-waf-action: challenge, nothing else")
    func challenge() {
        #expect(ProxyRules.isChallenge(Self.answer("202 Accepted", [("x-amzn-waf-action", "challenge")])))
        #expect(ProxyRules.isChallenge(Self.answer("202 Accepted", [("X-Amzn-Waf-Action", " Challenge ")])))
        #expect(!ProxyRules.isChallenge(Self.answer("202 Accepted", [])))
        #expect(!ProxyRules.isChallenge(Self.answer("200 OK", [("x-amzn-waf-action", "challenge")])))
        #expect(!ProxyRules.isChallenge(Self.answer("202 Accepted", [("x-amzn-waf-action", "captcha")])))
    }

    @Test("after a challenge: a newer token replays at once, the same token asks for a refresh, one replay at most")
    func afterChallenge() {
        #expect(ProxyRules.afterChallenge(replayable: true, replayed: false, sentToken: "T1", currentToken: "T2") == .replay(token: "T2"))
        #expect(ProxyRules.afterChallenge(replayable: true, replayed: false, sentToken: "T1", currentToken: "T1") == .refresh)
        #expect(ProxyRules.afterChallenge(replayable: true, replayed: false, sentToken: nil, currentToken: nil) == .refresh)
        #expect(ProxyRules.afterChallenge(replayable: true, replayed: false, sentToken: nil, currentToken: "T1") == .replay(token: "T1"))
        #expect(ProxyRules.afterChallenge(replayable: true, replayed: true, sentToken: "T1", currentToken: "T2") == .passOn)
        #expect(ProxyRules.afterChallenge(replayable: false, replayed: false, sentToken: "T1", currentToken: "T2") == .passOn)
        #expect(ProxyRules.afterRefresh("T2", sentToken: "T1") == .replay(token: "T2"))
        #expect(ProxyRules.afterRefresh("T1", sentToken: "T1") == .passOn)
        #expect(ProxyRules.afterRefresh(nil, sentToken: "T1") == .passOn)
    }

    @Test(
        "the upstream must be domainName, below it, or loopback; https, or http to loopback",
        arguments: [
            ("https://example.com", nil), ("https://api.example.com:8443/v1", nil), ("http://127.0.0.1:8080/", nil),
            ("http://[::1]:9000", nil), ("https://evil.com/", "names evil.com"), ("https://notexample.com/", "names notexample.com"),
            ("http://api.example.com/", "uses http to a host that is not loopback"), ("https://u:p@example.com/", "holds user credentials"),
            ("https://example.com/?q", "has a query or fragment"), ("ftp://example.com/", "has the scheme ftp"),
            ("example.com", "is not an absolute URL"),
        ] as [(String, String?)])
    func upstreams(url: String, problem: String?) {
        switch UpstreamTarget.parse(url, domainName: "example.com") {
        case .success: #expect(problem == nil, "\(url)")
        case .failure(let refused): #expect(problem.map { refused.text.hasPrefix($0) } == true, "\(url): \(refused.text)")
        }
    }

    @Test("the upstream's Host is its authority as written; a port only when given")
    func authority() throws {
        #expect(try UpstreamTarget.parse("https://example.com/", domainName: "example.com").get().authority == "example.com")
        #expect(try UpstreamTarget.parse("http://[::1]:9000/a/", domainName: "example.com").get().authority == "[::1]:9000")
        #expect(try UpstreamTarget.parse("http://[::1]:9000/a/", domainName: "example.com").get().basePath == "/a")
    }

    @Test(
        "TENANT8: dot-segments are removed from the client's path before it goes below the base path; encoded ones, encoded slashes and backslashes are refused",
        arguments: [
            ("/api/../admin", "/base/admin"), ("/a/./b/../c", "/base/a/c"), ("/../../x", "/base/x"), ("/a/..", "/base/"), ("/a/.", "/base/a/"),
            ("/a/b?q=/../x", "/base/a/b?q=/../x"), ("http://elsewhere/a/../b", "/base/b"), ("/a%2ex/b", "/base/a%2ex/b"),
            ("/a//b?c=%2e%2e", "/base/a//b?c=%2e%2e"),
            ("/api/%2e%2e/admin", nil), ("/api/%2E/x", nil), ("/api/.%2e/x", nil), ("/api%2F..%2Fadmin", nil), ("/a/%5c", nil), ("/a\\b", nil),
        ] as [(String, String?)])
    func TENANT8_dotSegments(target: String, expected: String?) throws {
        let head = Self.head(target)
        switch ProxyRules.upstreamTarget(for: head, upstream: Self.upstream) {
        case .success(let path): #expect(path == expected, "\(target) → \(path)")
        case .failure(let refusal): #expect(expected == nil && refusal.reply.status == .badRequest, "\(target) refused")
        }
    }

    @Test("TENANT9: a chunked answer that also names a length goes to the client chunked, without the length")
    func TENANT9_chunkedWithLength() throws {
        let answer = Self.answer("200 OK", [("Content-Length", "5"), ("Transfer-Encoding", "chunked")])
        let framing = try HTTPFraming.response(answer, toHead: false)
        #expect(framing == .chunked)
        var bytes = ByteBuffer()
        ProxyRules.writeClientHead(answer, framing: framing, clientFraming: .asUpstream, keepAlive: true, into: &bytes)
        let written = try HTTPHeadParser.response(bytes)
        #expect(written.values("content-length").isEmpty && written.values("transfer-encoding") == ["chunked"])
        #expect(try HTTPFraming.response(written, toHead: false) == .chunked, "one framing a client reads one way")
    }
}
