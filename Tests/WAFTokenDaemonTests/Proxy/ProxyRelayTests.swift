import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// The proxy's relay against a scripted upstream, over real sockets: every framing an upstream
/// may answer with reaches the client intact, the request goes upstream as it should, and what
/// could be read two ways never leaves the proxy.
@Suite("Proxy relay: on the wire", .offPool, .timeLimit(.minutes(2)))
struct ProxyRelayTests {
    static let script: @Sendable (String) -> ScriptedUpstream.Reply = { path in
        switch path {
        case "/length": .init("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Kind: length\r\n\r\nhello")
        case "/chunked":
            .init(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
            )
        case "/empty": .init("HTTP/1.1 204 No Content\r\n\r\n")
        case "/interim": .init("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        case "/close": .init("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", close: true)
        default: .init("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\necho")
        }
    }

    /// A daemon whose proxy, on a Unix socket, forwards to a scripted upstream.
    static func withRelay(_ body: (ScriptedUpstream, String) async throws -> Void) async throws {
        let upstream = try await ScriptedUpstream(script)
        let socket = try scratchDirectory("waf-relay").appendingPathComponent("proxy.sock").path
        do {
            try await withDaemon(daemon: ["--proxy-listen", socket, "--proxy-upstream", upstream.origin]) { _, _ in
                // The proxy binds its socket once the API's is up. Its file appears at bind, before
                // listen: a connection in between is refused, so wait for one that is taken.
                #expect(await eventually { (try? RawSocket(path: socket)) != nil }, "the proxy's socket takes connections")
                try await body(upstream, socket)
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test("pipelined requests get the upstream's length, chunks, nothing for HEAD and 204, no interim answer, and the answer to the close, in order")
    func framingsReachTheClient() async throws {
        try await Self.withRelay { upstream, socket in
            let client = try RawSocket(path: socket)
            client.send(
                ["/length", "/chunked", "/length", "/empty", "/interim", "/close"].enumerated().map { index, path in
                    "\(index == 2 ? "HEAD" : "GET") \(path) HTTP/1.1\r\nHost: x\r\n\r\n"
                }.joined())
            let (bytes, closed) = client.receive(timeout: .seconds(10))
            var answers = Answers(bytes: bytes)
            let length = answers.next()
            #expect(length?.status == 200 && length?.body == "hello" && length?.headers["x-kind"] == ["length"])
            #expect(length?.headers["via"] == ["1.1 waf-tokend"])
            let chunked = answers.next()
            #expect(chunked?.body == "hello world" && chunked?.headers["transfer-encoding"] == ["chunked"])
            #expect(chunked?.headers["x-hop"] == nil, "a header the upstream's Connection names stays behind")
            let head = answers.next(toHead: true)
            #expect(head?.status == 200 && head?.headers["content-length"] == ["5"] && head?.body == "")
            #expect(answers.next()?.status == 204)
            let interim = answers.next()
            #expect(interim?.status == 200 && interim?.body == "ok")
            let close = answers.next()
            #expect(close?.body == "until the end" && close?.headers["connection"] == ["close"])
            #expect(closed, "the answer to the close ends the client's connection")
            #expect(answers.rest.isEmpty, "nothing after: \(answers.rest)")
            #expect(upstream.requests.map(\.path) == ["/length", "/chunked", "/length", "/empty", "/interim", "/close"])
        }
    }

    @Test("an HTTP/1.0 client gets a chunked answer's data, then the close")
    func oldClientsGetData() async throws {
        try await Self.withRelay { _, socket in
            let client = try RawSocket(path: socket)
            client.send("GET /chunked HTTP/1.0\r\n\r\n")
            let (bytes, closed) = client.receive(timeout: .seconds(10))
            var answers = Answers(bytes: bytes)
            let answer = answers.next()
            #expect(answer?.status == 200 && answer?.body == "hello world" && answer?.headers["transfer-encoding"] == nil)
            #expect(closed)
        }
    }

    @Test(
        "upstream, a request goes with the token cookie, the upstream's Host, Via, its body framed by its length, and no hop-by-hop header or Expect")
    func whatGoesUpstream() async throws {
        try await Self.withRelay { upstream, socket in
            let client = try RawSocket(path: socket)
            client.send(
                "POST /echo HTTP/1.1\r\nHost: elsewhere\r\nCookie: a=1\r\nConnection: close, X-Secret\r\nX-Secret: s\r\nTE: trailers\r\n"
                    + "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            let (bytes, _) = client.receive(timeout: .seconds(10))
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"), "\(text)")
            let sent = try #require(upstream.requests.first)
            #expect(sent.head.hasPrefix("POST /echo HTTP/1.1\r\n"))
            #expect(sent.header("host") == [String(upstream.origin.dropFirst("http://".count))])
            #expect(sent.header("cookie").count == 1 && sent.header("cookie")[0].hasPrefix("a=1; aws-waf-token="))
            #expect(sent.header("content-length") == ["5"] && sent.body == "abcde")
            #expect(sent.header("via") == ["1.1 waf-tokend"])
            for hop in ["connection", "x-secret", "te", "expect", "transfer-encoding"] {
                #expect(sent.header(hop).isEmpty, "\(hop) went upstream")
            }
        }
    }

    @Test("every request smuggling shape gets 400 and closes the connection, and nothing reaches the upstream")
    func smugglingStaysOut() async throws {
        try await Self.withRelay { upstream, socket in
            for request in [
                "POST /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n",
                "POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 40\r\n\r\nhello",
                "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
                "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "GET /x HTTP/1.1\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n",
                "GET /x HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n",
                "GET /x HTTP/1.1\r\nX-A: a\u{01}b\r\n\r\n",
                "GET /x HTTP/1.1\nHost: x\n\n",
                "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello!\r\n0\r\n\r\n",
            ] {
                let client = try RawSocket(path: socket)
                client.send(request)
                let answer = client.response(timeout: .seconds(5))
                #expect(answer.status == 400 && answer.closed, "\(request.debugDescription): \(answer.text)")
            }
            #expect(upstream.requests.isEmpty, "reached the upstream: \(upstream.requests.map(\.head))")
        }
    }
}

/// Answers read off a connection as a client reads them: status, headers, a body by its framing.
struct Answers {
    let bytes: [UInt8]
    var index = 0

    var rest: String { String(decoding: bytes[index...], as: UTF8.self) }

    mutating func next(toHead: Bool = false) -> (status: Int, headers: [String: [String]], body: String)? {
        let text = bytes[index...]
        guard let end = text.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let lines = String(decoding: bytes[index..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        guard let status = Int(lines[0].dropFirst(9).prefix(3)) else { return nil }
        var headers: [String: [String]] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[parts[0].lowercased(), default: []].append(parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : "")
        }
        index = end.upperBound
        var body: [UInt8] = []
        if toHead || status == 204 || status == 304 {
        } else if let length = headers["content-length"]?.first.flatMap({ Int($0) }) {
            body = Array(bytes[index..<min(bytes.count, index + length)])
            index += body.count
        } else if headers["transfer-encoding"] == ["chunked"] {
            while let lineEnd = bytes[index...].firstRange(of: Array("\r\n".utf8)),
                let size = Int(String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self), radix: 16)
            {
                index = lineEnd.upperBound
                if size == 0 {
                    index += 2
                    break
                }
                body += bytes[index..<index + size]
                index += size + 2
            }
        } else {
            body = Array(bytes[index...])
            index = bytes.count
        }
        return (status, headers, String(decoding: body, as: UTF8.self))
    }
}
