import NIOCore
import Testing
@testable import WAFTokenDaemon
import WAFTestTraits

@Suite("The socket's fast path and codec, on an EmbeddedChannel", .offPool)
struct TokenFastPathHandlerTests {
    static let plain = "GET /v1/token HTTP/1.1\r\nHost: localhost\r\n\r\n"

    @Test("a plain GET /v1/token is answered from the cache: JSON, or the bare token for text/plain")
    func plainRequest() throws {
        let socket = try EmbeddedSocket()
        let json = try socket.exchange(Self.plain)
        #expect(json.hasPrefix("HTTP/1.1 200 OK\r\n") && json.contains("\"value\":\"token-1\"") && json.contains("Content-Type: application/json"))
        let text = try socket.exchange("GET /v1/token HTTP/1.1\r\nAccept: text/plain\r\n\r\n")
        #expect(text.hasSuffix("\r\n\r\ntoken-1") && text.contains("Content-Type: text/plain"))
    }

    @Test("input split at every byte gives the same answers as in one piece, pipelined requests included")
    func splitAtEveryByte() throws {
        let requests = Self.plain + "GET /v1/token HTTP/1.1\r\nAccept: text/plain\r\n\r\n" + "GET /readyz HTTP/1.1\r\n\r\n" + Self.plain
        let whole = try EmbeddedSocket().exchange(requests)
        #expect(whole.statusCodes == [200, 200, 200, 200])
        for split in 1..<requests.utf8.count {
            let pieces = try EmbeddedSocket().exchange(requests, splits: [split])
            #expect(pieces.statusCodes == [200, 200, 200, 200], "split at \(split)")
        }
        let byByte = try EmbeddedSocket().exchange(requests, splits: Array(1..<requests.utf8.count))
        #expect(byByte.statusCodes == [200, 200, 200, 200])
        #expect(byByte.contains("token-1") && byByte.contains("{\"ready\":true}"))
    }

    @Test("pipelined plain requests are answered in one write, in order")
    func pipelinedInOneWrite() throws {
        let socket = try EmbeddedSocket()
        try socket.channel.writeInbound(socket.channel.allocator.buffer(string: String(repeating: Self.plain, count: 50)))
        var writes = 0
        while try socket.channel.readOutbound(as: ByteBuffer.self) != nil { writes += 1 }
        #expect(writes == 50, "one buffer per answer")
        #expect(try socket.exchange(String(repeating: Self.plain, count: 3)).statusCodes == [200, 200, 200])
    }

    @Test("no token yet: 503 with Retry-After, from the fast path")
    func noTokenYet() throws {
        let answer = try EmbeddedSocket(tokenFirst: false).exchange(Self.plain)
        #expect(answer.statusCodes == [503] && answer.contains("Retry-After: 1") && answer.contains("\"error\":\"noToken\""))
    }

    @Test("backpressure: while the connection cannot write, nothing more is answered; once it can, the rest is")
    func backpressure() throws {
        let socket = try EmbeddedSocket()
        socket.channel.isWritable = false
        #expect(try socket.exchange(String(repeating: Self.plain, count: 5)).isEmpty, "no answer while the peer does not read")
        socket.channel.isWritable = true
        socket.channel.pipeline.fireChannelWritabilityChanged()
        socket.settle()
        #expect(try socket.written().statusCodes == [200, 200, 200, 200, 200])
    }

    @Test("anything but the plain request goes through the codec for good, in order after the plain ones")
    func switchToTheCodec() throws {
        let socket = try EmbeddedSocket()
        let answer = try socket.exchange(Self.plain + "GET /v1/status HTTP/1.1\r\n\r\n" + Self.plain)
        #expect(answer.statusCodes == [200, 200, 200])
        #expect(answer.contains("\"lifecycle\""))
    }

    @Test("a peer outside the allowed users gets 403 and no token")
    func forbiddenPeer() throws {
        let answer = try EmbeddedSocket(allowedUsers: ["0"]).exchange(Self.plain + Self.plain)
        #expect(answer.statusCodes == [403, 403])
        #expect(!answer.contains("token-1"))
    }
}
