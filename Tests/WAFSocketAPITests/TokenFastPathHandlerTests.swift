import NIOCore
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI

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

    @Test(
        "MULTI-2: ?provider= and ?domain= are answered on the fast path from each provider's own cache, whole or split at every byte; what the API refuses goes to the codec"
    )
    func MULTI2_selectorsOnTheFastPath() throws {
        let requests =
            "GET /v1/token?provider=pay HTTP/1.1\r\n\r\n" + Self.plain
            + "GET /v1/token?domain=a.pay.example.com HTTP/1.1\r\nAccept: text/plain\r\n\r\n"
            + "GET /v1/token?provider=nope HTTP/1.1\r\n\r\n" + "GET /v1/token?provider=default HTTP/1.1\r\n\r\n"
        let whole = try EmbeddedSocket(pay: true).exchange(requests)
        #expect(whole.statusCodes == [200, 200, 200, 404, 200], "\(whole)")
        let values = whole.components(separatedBy: "\"value\":\"").dropFirst().map { $0.prefix(7) }
        #expect(values == ["token-2", "token-1", "token-1"], "\(values)")
        #expect(whole.contains("\r\n\r\ntoken-2HTTP/1.1 404"), "the text form of pay's, then the codec's 404")
        for split in 1..<requests.utf8.count {
            let pieces = try EmbeddedSocket(pay: true).exchange(requests, splits: [split])
            #expect(pieces.statusCodes == [200, 200, 200, 404, 200], "split at \(split)")
        }
        // The fast path itself takes them (the codec would answer the same bytes).
        func decide(_ head: String) -> String? {
            Array(head.utf8).withUnsafeBytes { bytes in
                PlainTokenRequest.decide(bytes).map { decision in decision.selector.map { String(decoding: bytes[$0], as: UTF8.self) } ?? "" }
            }
        }
        #expect(decide("GET /v1/token?provider=pay HTTP/1.1\r\n\r\n") == "provider=pay")
        #expect(decide("GET /v1/token?domain=A.pay.example.com HTTP/1.1\r\n\r\n") == "domain=A.pay.example.com")
        #expect(decide(Self.plain) == "")
        for other in [
            "GET /v1/token?wait=5 HTTP/1.1\r\n\r\n", "GET /v1/token?provider=Pay HTTP/1.1\r\n\r\n", "GET /v1/token?provider= HTTP/1.1\r\n\r\n",
            "GET /v1/token?provider=pay&wait=1 HTTP/1.1\r\n\r\n", "GET /v1/tokens HTTP/1.1\r\n\r\n",
        ] {
            #expect(decide(other) == nil, "\(other.debugDescription) is the codec's")
        }
        // A provider the peer (uid 1000) may not use: 403, from the codec.
        let refused = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"]).exchange("GET /v1/token?provider=pay HTTP/1.1\r\n\r\n" + Self.plain)
        #expect(refused.statusCodes == [403, 200] && !refused.contains("token-2"), "\(refused)")
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

    @Test("backpressure: no read reaches the socket while the connection cannot write, before and after the switch to the codec")
    func backpressureHoldsReads() throws {
        let socket = try EmbeddedSocket()
        let reads = ReadCounter()
        try socket.channel.pipeline.syncOperations.addHandler(reads, position: .first)
        func readWhileBlocked() -> (held: Bool, resumed: Bool) {
            let before = reads.count
            socket.channel.isWritable = false
            socket.channel.pipeline.fireChannelWritabilityChanged()
            socket.channel.read()
            let held = reads.count == before
            socket.channel.isWritable = true
            socket.channel.pipeline.fireChannelWritabilityChanged()
            return (held, reads.count == before + 1)
        }
        #expect(readWhileBlocked() == (true, true), "on the fast path")
        #expect(try socket.exchange("GET /v1/status HTTP/1.1\r\n\r\n").statusCodes == [200])
        #expect(readWhileBlocked() == (true, true), "with the codec behind the fast path")
    }

    @Test("anything but the plain request goes through the codec for good, in order after the plain ones")
    func switchToTheCodec() throws {
        let socket = try EmbeddedSocket()
        let answer = try socket.exchange(Self.plain + "GET /v1/status HTTP/1.1\r\n\r\n" + Self.plain)
        #expect(answer.statusCodes == [200, 200, 200])
        #expect(answer.contains("\"lifecycle\""))
    }

    @Test("TENANT6: a peer outside the allowed users gets 403, no token, and the connection closes")
    func TENANT6_forbiddenPeer() throws {
        let socket = try EmbeddedSocket(allowedUsers: ["0"])
        let answer = try socket.exchange(Self.plain + Self.plain)
        #expect(answer.statusCodes == [403])
        #expect(answer.contains("Connection: close"))
        #expect(!answer.contains("token-1"))
        #expect(!socket.isOpen)
    }
}

/// Counts the reads that reach the front of the pipeline.
private final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny
    private(set) var count = 0

    func read(context: ChannelHandlerContext) {
        count += 1
        context.read()
    }
}
