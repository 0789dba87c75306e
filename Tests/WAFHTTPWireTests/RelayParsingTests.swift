import NIOCore
import Testing
import WAFTestTraits

@testable import WAFHTTPWire

/// The proxy's reading of HTTP, without I/O: heads, framing, chunks; every input also cut at
/// every byte, as reads deliver it.
@Suite("Proxy relay: reading HTTP", .offPool)
struct RelayParsingTests {
    /// The head and framing of `text`, or the failure.
    static func request(_ text: String) -> Result<HTTPFraming, HTTPHeadParser.Failure> {
        Result { () throws(HTTPHeadParser.Failure) in
            let bytes = ByteBuffer(string: text)
            guard let end = try bytes.withUnsafeReadableBytes({ raw throws(HTTPHeadParser.Failure) in try HTTPHeadParser.headEnd(raw, limit: 16384) })
            else {
                throw .malformed("incomplete")
            }
            return try HTTPFraming.request(HTTPHeadParser.request(bytes.getSlice(at: 0, length: end)!))
        }
    }

    @Test("a header name's bytes are RFC 9110's tchar, and no other byte of the 256")
    func tokenBytes() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPHeadParser.isToken(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }

    @Test("a header value's bytes are HTAB, SP, visible ASCII and obs-text, at any place in a value of any length, read eight at a time or one")
    func fieldValueBytes() {
        for length in [1, 7, 8, 9, 15, 16, 17, 23, 24, 25] {
            for position in Set([0, 1, length / 2, length - 2, length - 1].filter { $0 >= 0 && $0 < length }) {
                for byte in UInt8.min...UInt8.max {
                    var value = [UInt8](repeating: UInt8(ascii: "v"), count: length)
                    value[position] = byte
                    var bytes = ByteBuffer(string: "GET / HTTP/1.1\r\nX-A: ")
                    bytes.writeBytes(value)
                    bytes.writeString("\r\n\r\n")
                    let parsed = Result { () throws(HTTPHeadParser.Failure) in try HTTPHeadParser.request(bytes) }
                    // CR and LF end the line where they are: refused too, as a control byte or a bare LF.
                    let allowed = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
                    if case .success = parsed {
                        #expect(allowed, "byte \(byte) at \(position) of \(length) accepted")
                    } else {
                        #expect(!allowed, "byte \(byte) at \(position) of \(length) refused: \(parsed)")
                    }
                }
            }
        }
    }

    @Test("a header name's every byte: a tchar goes on, a colon ends the name, any other byte is refused, the line's end included")
    func fieldNameBytes() {
        for byte in UInt8.min...UInt8.max where byte != UInt8(ascii: ":") && byte != 0x0A {
            let bytes = ByteBuffer(bytes: Array("GET / HTTP/1.1\r\nX-".utf8) + [byte] + Array("a: v\r\n\r\n".utf8))
            let parsed = Result { () throws(HTTPHeadParser.Failure) in try HTTPHeadParser.request(bytes) }
            if HTTPHeadParser.isToken(byte) {
                guard case .success(let head) = parsed else { Issue.record("byte \(byte) refused: \(parsed)"); continue }
                #expect(head.fields.count == 1 && head.fields[0].name.count == 4, "byte \(byte)")
            } else {
                guard case .failure(.malformed(let reason)) = parsed else { Issue.record("byte \(byte) accepted"); continue }
                #expect(reason.contains("header name") || reason.contains("control byte") || reason.contains("no colon"), "byte \(byte): \(reason)")
            }
        }
        for (line, reason) in [
            ("X-A v", "header name"), (": v", "no name"), ("X-A", "no colon"), ("X A: v", "header name"), ("X-A\t: v", "header name"),
        ] {
            let parsed = Result { () throws(HTTPHeadParser.Failure) in
                try HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.1\r\n\(line)\r\n\r\n"))
            }
            guard case .failure(.malformed(let said)) = parsed else { Issue.record("\(line) accepted"); continue }
            #expect(said.contains(reason), "\(line): \(said)")
        }
    }

    @Test("a name a head has is found in any case, by its bit and by its bytes; one it lacks is not, even when it shares a bit")
    func nameBits() throws {
        let names: [StaticString] = [
            "connection", "content-length", "transfer-encoding", "upgrade", "expect", "cookie", "host", "x-amzn-waf-action", "te",
        ]
        for name in names {
            let lower = "\(name)"
            for spelled in [lower, lower.uppercased(), lower.prefix(1).uppercased() + lower.dropFirst(), "x" + lower.dropFirst()] {
                let head = try HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.1\r\nAccept: */*\r\n\(spelled): v\r\n\r\n"))
                let bit = head.bytes.withUnsafeReadableBytes { HTTPHead.nameBit(of: head.fields[1].name, $0) }
                let same = spelled.lowercased() == lower
                #expect(head.names & bit != 0 && head.fields.count == 2, "\(spelled)")
                #expect(!same || (bit == HTTPHead.nameBit(name) && head.mayContain(name)), "\(spelled): the bit of \(lower)")
                #expect(head.contains(name) == same && head.values(name) == (same ? ["v"] : []), "\(spelled)")
            }
        }
        let head = try HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.1\r\nConnection: close\r\nCookie: a=1\r\n\r\n"))
        #expect(head.mayContain("connection") && head.contains("connection") && head.lists("connection", "close"))
        #expect(head.mayContain("COOKIE") && head.values("cookie") == ["a=1"] && head.count("cookie") == 1)
        #expect(!head.mayContain("upgrade") && !head.contains("upgrade") && head.values("upgrade").isEmpty && head.count("upgrade") == 0)
        // Names of one bit, told apart by their bytes.
        let shared = try HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.1\r\nXa-b: 1\r\n\r\n"))
        #expect(HTTPHead.nameBit("xa-b") == HTTPHead.nameBit("xb-b"), "the same length, first and last byte")
        #expect(shared.contains("xa-b") && !shared.contains("xb-b"))
    }

    /// Every shape by which a proxy and the server behind it could disagree on where a request
    /// ends: refused before anything goes upstream.
    @Test(
        "request smuggling shapes are refused",
        arguments: [
            ("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "both Content-Length and Transfer-Encoding"),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", "both Content-Length and Transfer-Encoding"),
            ("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "more than one Content-Length"),
            ("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", "more than one Content-Length"),
            ("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", "not a number"),
            ("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", "not a number"),
            ("POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\n", "not a number"),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "other than chunked"),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "other than chunked"),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "other than chunked"),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", "other than chunked"),
            ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.0"),
            ("GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", "obs-fold"),
            ("GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", "header name"),
            ("GET / HTTP/1.1\r\nX-A: a\u{01}b\r\n\r\n", "control byte"),
            ("GET / HTTP/1.1\r\nX-A: a\u{7F}b\r\n\r\n", "control byte"),
            ("GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", "control byte"),
            ("GET / HTTP/1.1\r\nX-A: 1\n\r\n", "bare LF"),
            ("GET / HTTP/1.1\nHost: x\r\n\r\n", "bare LF"),
            ("GET /\u{01} HTTP/1.1\r\n\r\n", "request target"),
            ("GET  / HTTP/1.1\r\n\r\n", "request target"),
            ("G(T / HTTP/1.1\r\n\r\n", "method"),
            ("GET / HTTP/1.1\r\n: no-name\r\n\r\n", "no name"),
            ("GET / HTTP/1.1\r\nno-colon\r\n\r\n", "no colon"),
        ])
    func smuggling(text: String, why: String) {
        switch Self.request(text) {
        case .success(let framing): Issue.record("accepted \(text.debugDescription) as \(framing)")
        case .failure(.malformed(let message)): #expect(message.contains(why), "\(text.debugDescription): \(message)")
        case .failure(let other): Issue.record("\(text.debugDescription): \(other)")
        }
    }

    @Test("a version other than 1.0 and 1.1 is 505; a head over its limit or with too many fields is 431")
    func versionsAndLimits() {
        #expect(Self.request("GET / HTTP/2.0\r\n\r\n") == .failure(.unsupportedVersion))
        #expect(Self.request("GET / HTTP/1.2\r\n\r\n") == .failure(.unsupportedVersion))
        #expect(Self.request("GET / HTTP/1.1\r\n" + String(repeating: "X-A: 1\r\n", count: 200) + "\r\n") == .failure(.tooLarge))
        let big = ByteBuffer(string: "GET / HTTP/1.1\r\nX-A: " + String(repeating: "a", count: 20000))
        #expect(throws: HTTPHeadParser.Failure.tooLarge) {
            try big.withUnsafeReadableBytes { raw throws(HTTPHeadParser.Failure) in _ = try HTTPHeadParser.headEnd(raw, limit: 16384) }
        }
    }

    @Test("a plain request: its parts, its framing, keep-alive by version")
    func plainRequests() throws {
        let bytes = ByteBuffer(string: "POST /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nContent-Length: 3\r\nCookie:  a=1 \r\n\r\n")
        let head = try HTTPHeadParser.request(bytes)
        #expect(head.method == "POST" && head.target == "/a?b=1" && head.minorVersion == 1)
        #expect(head.values("cookie") == ["a=1"])
        #expect(head.values("x-empty") == [""])
        #expect(try HTTPFraming.request(head) == .length(3))
        #expect(head.keepAlive)
        #expect(try !HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.1\r\nConnection: Close\r\n\r\n")).keepAlive)
        #expect(try !HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.0\r\n\r\n")).keepAlive)
        #expect(try HTTPHeadParser.request(ByteBuffer(string: "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")).keepAlive)
        #expect(Self.request("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n") == .success(.chunked))
        #expect(Self.request("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n") == .success(HTTPFraming.none))
    }

    @Test("the end of a head is found, and a bare LF refused, wherever the reads cut it")
    func headEndAtEverySplit() throws {
        let good = Array("GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\nNEXT".utf8)
        let bad = Array("GET / HTTP/1.1\r\nHost: x\nAccept: */*\r\n\r\n".utf8)
        for cut in 1..<good.count {
            #expect(try Self.headEndInTwoReads(good, cut) == good.count - 4, "cut at \(cut)")
        }
        for cut in 1..<bad.count {
            #expect(throws: HTTPHeadParser.Failure.self, "cut at \(cut)") { _ = try Self.headEndInTwoReads(bad, cut) }
        }
    }

    /// What the proxy does with a head in two reads: look, remember how far, look again.
    static func headEndInTwoReads(_ bytes: [UInt8], _ cut: Int) throws -> Int? {
        let first = try bytes[..<cut].withUnsafeBytes { raw throws(HTTPHeadParser.Failure) in try HTTPHeadParser.headEnd(raw, limit: 16384) }
        if let first { return first }
        return try bytes.withUnsafeBytes { raw throws(HTTPHeadParser.Failure) in try HTTPHeadParser.headEnd(raw, limit: 16384, from: cut) }
    }

    @Test(
        "answers: HEAD, 1xx, 204 and 304 have no body; chunks; a length; else to the close; lengths that disagree and codings other than chunked refused"
    )
    func answerFraming() throws {
        func framing(_ text: String, toHead: Bool = false) throws(HTTPHeadParser.Failure) -> HTTPFraming {
            try HTTPFraming.response(HTTPHeadParser.response(ByteBuffer(string: text)), toHead: toHead)
        }
        #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", toHead: true) == .none)
        #expect(try framing("HTTP/1.1 204 No Content\r\n\r\n") == .none)
        #expect(try framing("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n") == .none)
        #expect(try framing("HTTP/1.1 100 Continue\r\n\r\n") == .none)
        #expect(try framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n") == .chunked)
        #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n") == .length(5))
        #expect(try framing("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n") == .length(0))
        #expect(try framing("HTTP/1.0 200 OK\r\n\r\n") == .untilClose)
        #expect(throws: HTTPHeadParser.Failure.self) { try framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n") }
        #expect(throws: HTTPHeadParser.Failure.self) { try framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n") }
        #expect(throws: HTTPHeadParser.Failure.self) { try framing("HTTP/1.1 20 OK\r\n\r\n") }
        #expect(throws: HTTPHeadParser.Failure.unsupportedVersion) { try framing("HTTP/2.0 200 OK\r\n\r\n") }
        let head = try HTTPHeadParser.response(ByteBuffer(string: "HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\n\r\n"))
        #expect(head.status == 202)
    }

    @Test("a chunked body: its data and its end, wherever the reads cut it; trailers read past")
    func chunksAtEverySplit() throws {
        let body = Array("5;name=v\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT".utf8)
        for cut in 0...body.count - 4 {
            var scanner = ChunkedScanner()
            var data: [UInt8] = []
            var used = 0
            for piece in [body[..<cut], body[cut...]] where !scanner.isDone {
                let bytes = Array(piece)
                used += try bytes.withUnsafeBytes { raw throws(HTTPHeadParser.Failure) in
                    try scanner.scan(raw) { data += bytes[$0] }
                }
            }
            #expect(String(decoding: data, as: UTF8.self) == "hello, world!!!", "cut at \(cut)")
            #expect(scanner.isDone && used == body.count - 4, "cut at \(cut): used \(used)")
        }
    }

    @Test(
        "a chunked body that could be read two ways is refused",
        arguments: [
            "5\r\nhello!\r\n0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "z\r\n", "-5\r\n", "\r\n", "5 \u{01}\r\n",
            "0\r\nX: 1\n\r\n", "0\r\n\n", "fffffffffffffffff\r\n",
        ])
    func badChunks(text: String) {
        var scanner = ChunkedScanner()
        #expect(throws: HTTPHeadParser.Failure.self, "\(text.debugDescription)") {
            _ = try Array(text.utf8).withUnsafeBytes { raw throws(HTTPHeadParser.Failure) in try scanner.scan(raw) }
        }
    }
}

extension HTTPHeadParser.Failure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .malformed(let why): "malformed: \(why)"
        case .tooLarge: "too large"
        case .unsupportedVersion: "unsupported version"
        }
    }
}
