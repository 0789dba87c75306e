import NIOCore
import NIOHTTP1
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFSocketAPI

/// The socket API's connection as a value, without a channel; then the handler that performs it,
/// on the server's own pipeline, with every request kind pipelined and split at every byte.
@Suite("The socket API's connection machine", .offPool)
struct APIConnectionMachineTests {
    static func head(
        _ method: HTTPMethod = .GET, _ uri: String = "/v1/status", version: HTTPVersion = .http1_1, close: Bool = false
    )
        -> HTTPRequestHead
    {
        HTTPRequestHead(version: version, method: method, uri: uri, headers: close ? ["Connection": "close"] : [:])
    }

    /// A machine whose request `head` was read, with `body`, and is being routed.
    static func routing(_ head: HTTPRequestHead = head(), body: String = "") -> APIConnectionMachine {
        var machine = APIConnectionMachine()
        _ = machine.headArrived(head)
        machine.bodyArrived(ByteBuffer(string: body), limit: 64)
        _ = machine.endArrived()
        return machine
    }

    /// "200 kept" or "200 closed" for an answer written, else nil.
    static func wrote(_ action: APIConnectionMachine.Action) -> String? {
        if case .write(_, let reply, _, let keepAlive, _) = action { "\(reply.status.code) \(keepAlive ? "kept" : "closed")" } else { nil }
    }

    @Test("a request is read, routed with its body, answered, and the connection waits for the next")
    func readRouteAnswer() {
        var machine = APIConnectionMachine()
        guard case .requestStarted = machine.headArrived(Self.head(.PUT, "/v1/lifecycle")) else { Issue.record("no request started"); return }
        machine.bodyArrived(ByteBuffer(string: "fore"), limit: 64)
        machine.bodyArrived(ByteBuffer(string: "ground"), limit: 64)
        guard case .route(let head, let tooLarge) = machine.endArrived() else { Issue.record("not routed"); return }
        #expect(head.uri == "/v1/lifecycle" && !tooLarge)
        #expect(machine.routed.map { String(buffer: $0.body) } == "foreground", "the body, whole, while the request is routed")
        #expect(Self.wrote(machine.answered(.json(.ok, ["a": 1]), endpoint: "/v1/lifecycle", close: false, shuttingDown: false)) == "200 kept")
        guard case .idle(last: 1) = machine.state else { Issue.record("not idle after request 1: \(machine.state)"); return }
        #expect(machine.routed == nil, "no body is kept once the request is answered")
    }

    @Test("a body past the limit is not kept: the request is routed marked too large (413 once the peer is let in)")
    func bodyTooLarge() {
        var machine = APIConnectionMachine()
        _ = machine.headArrived(Self.head(.PUT, "/v1/lifecycle"))
        machine.bodyArrived(ByteBuffer(string: String(repeating: "x", count: 40)), limit: 64)
        machine.bodyArrived(ByteBuffer(string: String(repeating: "x", count: 40)), limit: 64)
        guard case .route(_, let tooLarge) = machine.endArrived() else { Issue.record("not routed"); return }
        #expect(tooLarge)
        #expect(machine.routed?.body.readableBytes == 40, "what passed the limit was dropped, not kept")
    }

    @Test(
        "Connection: close, HTTP/1.0 without keep-alive and a stop each close the connection after the answer; a pipelined request behind is dropped")
    func closingAnswers() {
        for (head, shuttingDown) in [(Self.head(close: true), false), (Self.head(version: .http1_0), false), (Self.head(), true)] {
            var machine = Self.routing(head)
            #expect(
                Self.wrote(machine.answered(.json(.ok, ["a": 1]), endpoint: "/v1/status", close: false, shuttingDown: shuttingDown)) == "200 closed")
            guard case .closing = machine.state else { Issue.record("not closing: \(machine.state)"); continue }
            guard case .none = machine.headArrived(Self.head()) else { Issue.record("a request read while closing"); continue }
            machine.bodyArrived(ByteBuffer(string: "x"), limit: 64)
            guard case .none = machine.endArrived() else { Issue.record("a request routed while closing"); continue }
        }
    }

    @Test("an answer awaited: one for an older request, or one that comes second, is dropped")
    func awaitedAnswers() {
        var machine = Self.routing()
        let number = machine.deferred(endpoint: "/v1/token", atStop: { APIHandler.stopping })
        #expect(number == 1)
        guard case .none = machine.arrived(.json(.ok, ["old": 1]), for: 0, shuttingDown: false) else {
            Issue.record("an older answer written"); return
        }
        #expect(Self.wrote(machine.arrived(.json(.ok, ["a": 1]), for: number, shuttingDown: false)) == "200 kept")
        guard case .none = machine.arrived(DaemonError.waitTimedOut(wait: "5").reply, for: number, shuttingDown: false) else {
            Issue.record("a second answer written")
            return
        }
    }

    @Test("the stop: an awaited answer comes by its deadline with what there is; a stream ends now; between requests nothing happens")
    func stop() {
        var awaiting = Self.routing()
        _ = awaiting.deferred(endpoint: "/v1/token", atStop: { .json(.ok, ["last": 1]) })
        guard case .answerAtStop(let number, let atStop) = awaiting.stopBegan() else { Issue.record("no answer at the stop"); return }
        #expect(Self.wrote(awaiting.arrived(atStop(), for: number, shuttingDown: true)) == "200 closed")

        var streaming = Self.routing(Self.head(.GET, "/v1/events"))
        streaming.streamStarted(id: 7)
        #expect(streaming.isStreaming)
        guard case .finishStream(id: 7) = streaming.stopBegan() else { Issue.record("the stream did not end at the stop"); return }
        guard case .none = streaming.streamFinished() else { Issue.record("a stream ended twice"); return }

        var idle = APIConnectionMachine()
        guard case .none = idle.stopBegan() else { Issue.record("an idle connection acted on the stop"); return }
    }

    @Test("a closed connection lets go of its stream; a body that stops coming gets 408 and the connection closes")
    func closeAndBodyTimeout() {
        var streaming = Self.routing(Self.head(.GET, "/v1/events"))
        streaming.streamStarted(id: 3)
        guard case .release(stream: 3) = streaming.closed() else { Issue.record("the stream was not released"); return }
        guard case .closed = streaming.state else { Issue.record("not closed"); return }

        var reading = APIConnectionMachine()
        _ = reading.headArrived(Self.head(.PUT, "/v1/lifecycle"))
        #expect(Self.wrote(reading.bodyTimedOut()) == "408 closed")
        var idle = APIConnectionMachine()
        guard case .none = idle.bodyTimedOut() else { Issue.record("a timer of no request answered"); return }
    }

    @Test("a request whose head came before the stop and which then waits gets its stop-time answer by the stop's deadline, not at its own timeout")
    func readBeforeTheStopThenWaits() throws {
        let socket = try EmbeddedSocket(tokenFirst: false)
        let loop = socket.channel.embeddedEventLoop
        _ = try socket.exchange("GET /v1/token?wait=30 HTTP/1.1\r\nContent-Length: 2\r\n\r\na")
        socket.channel.pipeline.fireUserInboundEventTriggered(ServerShutdownEvent(deadline: loop.now + .seconds(2)))
        #expect(try socket.exchange("b").isEmpty, "no token yet, and the stop's deadline has not come")
        loop.advanceTime(by: .seconds(2))
        socket.settle()
        #expect(try socket.written().statusCodes == [503], "answered with what there is at the stop, within its deadline")
    }

    /// One of each way a request is answered: at once with a body read (`PUT /v1/lifecycle`),
    /// later from the provider (`?wait=`, `/v1/status`, `/healthz`), refused by the router (404,
    /// 405), refused with its body too large (413), and an unknown provider (404).
    static let pipeline =
        "PUT /v1/lifecycle HTTP/1.1\r\nContent-Length: 10\r\n\r\nforeground" + "GET /v1/token?wait=5 HTTP/1.1\r\n\r\n"
        + "GET /v1/status HTTP/1.1\r\n\r\n" + "GET /healthz HTTP/1.1\r\n\r\n" + "GET /nowhere HTTP/1.1\r\n\r\n"
        + "DELETE /v1/token HTTP/1.1\r\n\r\n" + "PUT /v1/lifecycle HTTP/1.1\r\nContent-Length: 9000\r\n\r\n\(String(repeating: "x", count: 9000))"
        + "GET /v1/token?provider=nosuch HTTP/1.1\r\n\r\n" + "GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n"

    @Test("every kind of answer, pipelined and split at every byte, is the same as in one piece, in order, and the connection closes at the end")
    func pipelinedSplitAtEveryByte() throws {
        let whole = try EmbeddedSocket()
        let expected = try whole.exchange(Self.pipeline).statusCodes
        #expect(expected == [200, 200, 200, 200, 404, 405, 413, 404, 200], "\(expected)")
        #expect(!whole.isOpen)
        let bytes = Array(Self.pipeline.utf8)
        // Every byte but those inside the 9,000-byte body, where every 97th.
        let body = try #require(Self.pipeline.firstRange(of: String(repeating: "x", count: 9000)))
        let bodyStart = Self.pipeline.utf8.distance(from: Self.pipeline.startIndex, to: body.lowerBound)
        let splits = (1..<bytes.count).filter { $0 <= bodyStart || $0 >= bodyStart + 9000 || $0 % 97 == 0 }
        for split in splits {
            let socket = try EmbeddedSocket()
            let codes = try socket.exchange(Self.pipeline, splits: [split]).statusCodes
            #expect(codes == expected, "split at \(split): \(codes)")
            #expect(!socket.isOpen, "split at \(split): the connection stayed open after Connection: close")
        }
        // And every piece one byte long, at once.
        let bytewise = try EmbeddedSocket()
        #expect(try bytewise.exchange(Self.pipeline, splits: Array(1..<bytes.count)).statusCodes == expected)
    }
}
