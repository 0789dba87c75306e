import NIOCore
import Testing
import WAFTestTraits

@testable import WAFHTTPWire

@Suite("An upstream's answers read from raw bytes", .offPool)
struct AnswerReaderTests {
    /// What the reader handed on, as text: "head STATUS", body bytes, "end".
    static func read(
        _ pieces: [String], toHead: Bool = false, decode: Bool = false, closeAfter: Bool = false
    ) throws -> (parts: [String], reusable: Bool) {
        let reader = AnswerReader()
        reader.expectAnswer(toHead: toHead, decodeChunks: decode)
        var parts: [String] = []
        var body = ""
        let take: (AnswerReader.Part) -> Bool = { part in
            switch part {
            case .head(let head, _): parts.append("head \(head.status)")
            case .body(let bytes): body += String(buffer: bytes)
            case .end:
                if !body.isEmpty { parts.append(body) }
                body = ""
                parts.append("end")
            }
            return true
        }
        for piece in pieces { try reader.read(ByteBuffer(string: piece), take) }
        if closeAfter { _ = reader.closed(take) }
        if !body.isEmpty { parts.append(body) }
        return (parts, reader.reusable)
    }

    static let answers: [(name: String, bytes: String, toHead: Bool, decode: Bool, close: Bool, parts: [String], reusable: Bool)] = [
        ("by length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, false, false, ["head 200", "hello", "end"], true),
        (
            "chunked, as it came", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, false, false,
            ["head 200", "5\r\nhello\r\n0\r\n\r\n", "end"], true
        ),
        (
            "chunked, decoded", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, true, false,
            ["head 200", "hello", "end"], true
        ),
        ("an interim answer first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", false, false, false, ["head 204", "end"], true),
        ("to a HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true, false, false, ["head 200", "end"], true),
        ("to the close", "HTTP/1.1 200 OK\r\n\r\nuntil the end", false, false, true, ["head 200", "until the end", "end"], false),
        (
            "saying close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, false, false, ["head 200", "ok", "end"],
            false
        ),
        ("with more than its framing", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", false, false, false, ["head 200", "ok", "end"], false),
    ]

    @Test("Every framing an upstream answers with, split at every byte, is handed on as it is whole")
    func everyFramingSplitAtEveryByte() throws {
        for answer in Self.answers {
            let whole = try Self.read([answer.bytes], toHead: answer.toHead, decode: answer.decode, closeAfter: answer.close)
            #expect(whole.parts == answer.parts, "\(answer.name)")
            #expect(whole.reusable == answer.reusable, "\(answer.name)")
            let bytes = Array(answer.bytes.utf8)
            for split in 1..<bytes.count {
                let pieces = [String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self)]
                let seen = try Self.read(pieces, toHead: answer.toHead, decode: answer.decode, closeAfter: answer.close)
                #expect(seen.parts.joined() == whole.parts.joined() && seen.reusable == whole.reusable, "\(answer.name) split at \(split)")
            }
        }
    }

    @Test("A close in the middle of an answer framed by length cuts it short; bytes nobody asked for spoil the connection")
    func closesAndStrayBytes() throws {
        let reader = AnswerReader()
        reader.expectAnswer(toHead: false, decodeChunks: false)
        try reader.read(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")) { _ in true }
        #expect(reader.closed { _ in true } == false, "not the answer's end")

        let idle = AnswerReader()
        try idle.read(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n")) { _ in
            Issue.record("an answer nobody asked for was handed on")
            return true
        }
        #expect(!idle.reusable)
    }

    @Test("A part's taker that lets go stops the reading; 101 and a malformed head throw")
    func stopsAndFailures() throws {
        let reader = AnswerReader()
        reader.expectAnswer(toHead: false, decodeChunks: true)
        var parts = 0
        try reader.read(ByteBuffer(string: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n")) { part in
            parts += 1
            if case .body = part { return false }
            return true
        }
        #expect(parts == 2, "the head, one piece of the body, then nothing")

        for bad in ["HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"] {
            let failing = AnswerReader()
            failing.expectAnswer(toHead: false, decodeChunks: false)
            #expect(throws: HTTPHeadParser.Failure.self, "\(bad.debugDescription)") { try failing.read(ByteBuffer(string: bad)) { _ in true } }
        }
    }
}
