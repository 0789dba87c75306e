import NIOCore
import Testing
import WAFHTTPWire
import WAFTestTraits

@testable import WAFTokenProxy

/// Every path through a proxy connection's state, without bytes or sockets.
@Suite("The proxy connection's state machine", .offPool)
struct ProxyConnectionMachineTests {
    /// What the driver keeps for a request, and an upstream connection: only their identity matters here.
    final class Request {}
    final class Connection {}
    typealias Machine = ProxyConnectionMachine<Request, Connection>
    typealias Upstream = Machine.Upstream

    static func keep() -> Bool { true }

    static let ok = try! HTTPHeadParser.response(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"))
    static let challenge = try! HTTPHeadParser.response(
        ByteBuffer(string: "HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 3\r\n\r\n"))

    /// A machine whose request's head arrived.
    static func began(
        _ framing: HTTPFraming = .none, streams: Bool = false, keepAlive: Bool = true, upgrade: Bool = false, replayLimit: Int = 1024,
        idempotent: Bool = false
    ) -> (Machine, Machine.Begin, Request) {
        var machine = Machine()
        let request = Request()
        let begin = machine.requestBegan(
            request, framing: framing, streams: streams, keepAlive: keepAlive, upgrade: upgrade, expectsContinue: true, replayLimit: replayLimit,
            idempotent: idempotent)
        return (machine, begin, request)
    }

    /// A bodiless request sent on a connection, its answer not yet come.
    static func sent(keepAlive: Bool = true, reused: Bool = false, idempotent: Bool = false) -> (Machine, Request, Connection) {
        var (machine, _, request) = began(keepAlive: keepAlive, idempotent: idempotent)
        #expect(machine.tokenReady(for: request) == true)
        let connection = Connection()
        _ = machine.upstreamAttached(for: request, connection, reused: reused)
        return (machine, request, connection)
    }

    static func head(
        _ machine: inout Machine, challenge: Bool = false, clientFraming: ProxyRules.ClientFraming = .asUpstream, mayKeep: () -> Bool = keep
    )
        -> Machine.AnswerHead
    {
        machine.answerHeadArrived(
            challenge ? Self.challenge : ok, framing: .length(2), challenge: challenge, clientFraming: clientFraming, mayKeep: mayKeep)
    }

    static func bytes(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: UInt8(ascii: "x"), count: count) }

    @Test("A request without a body: served at once, sent, answered, and the connection kept for the next")
    func bodilessRequest() {
        var (machine, begin, request) = Self.began()
        #expect(begin == .serve, "no 100 Continue without a body; the guard hears it is served")
        #expect(machine.step?.name == "waitingForToken")
        #expect(machine.tokenReady(for: Request()) == false, "another request's token")
        #expect(machine.tokenReady(for: request) == true)
        #expect(machine.step?.name == "connecting")
        #expect(machine.tokenReady(for: request) == false, "a token comes once")
        #expect(machine.upstreamAttached(for: Request(), Connection(), reused: false) == nil, "a connection for another request goes back")
        let connection = Connection()
        #expect(
            machine.upstreamAttached(for: request, connection, reused: false)
                == .init(framing: .none, sendKept: false, dropKept: false, endChunked: false))
        #expect(machine.step?.upstream == Upstream(connection: connection, reused: false, requestComplete: true))
        #expect(machine.upstream === connection, "the step holds the connection, and nothing else does")
        #expect(Self.head(&machine) == .pass(keepAlive: true, tellGuard: false), "served from its head on: the guard heard it then")
        guard case .pass = machine.answerBodyArrived(Self.bytes(10), mayKeep: Self.keep) else { Issue.record("not passed"); return }
        guard case .finish(let ending) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(ending.upstream?.connection === connection && ending.upstream?.pool == true, "a whole request and answer: back to its pool")
        #expect(ending.keepAlive && !ending.tellGuard && ending.request === request)
        guard case .idle = machine.state else { Issue.record("not idle: \(machine.state)"); return }
    }

    @Test("The connection closes after the answer when the client, an upgrade, an unframed answer or the driver says so")
    func whenTheConnectionCloses() {
        var (machine, _, _) = Self.sent(keepAlive: false)
        var asked = 0
        let counting = {
            asked += 1
            return true
        }
        #expect(Self.head(&machine, mayKeep: counting) == .pass(keepAlive: false, tellGuard: false))
        #expect(asked == 0, "the driver's checks are not made when the answer already says close")
        guard case .finish(let ending) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(!ending.keepAlive && machine.isClosed)

        for (upgrade, framing, mayKeep) in [
            (true, ProxyRules.ClientFraming.asUpstream, true), (false, .decodedUntilClose, true), (false, .asUpstream, false),
        ] {
            var (machine, _, request) = Self.began(upgrade: upgrade)
            _ = machine.tokenReady(for: request)
            _ = machine.upstreamAttached(for: request, Connection(), reused: false)
            #expect(
                Self.head(&machine, clientFraming: framing, mayKeep: { mayKeep }) == .pass(keepAlive: false, tellGuard: false),
                "upgrade \(upgrade), \(framing), the daemon stops or the peer lost its access: \(!mayKeep)")
        }

        var refused = Machine()
        let refusal = refused.refuse()
        #expect(refused.isClosed && !refusal.keepAlive && refusal.tellGuard && refusal.request == nil)
        guard case .nothing = refused.reading else { Issue.record("a closed connection reads on"); return }
    }

    @Test("An answer that begins before the client's body ended closes the connection: the rest would be read as a request")
    func earlyAnswerCloses() {
        var (machine, _, request) = Self.began(.length(100), streams: true)
        _ = machine.tokenReady(for: request)
        let connection = Connection()
        _ = machine.upstreamAttached(for: request, connection, reused: false)
        #expect(machine.bodyArrived(10) == .forward(.length(100), connection))
        #expect(Self.head(&machine) == .pass(keepAlive: false, tellGuard: true), "the answer begins: the guard hears it now")
        #expect(machine.bodyArrived(90) == .forward(.length(100), connection), "the body still goes while the answer does")
        let (end, tellGuard) = machine.requestEnded()
        guard case .endUpstreamBody(let ending, chunked: false) = end, ending === connection, !tellGuard else {
            Issue.record("the body's end: \(end), told \(tellGuard)"); return
        }
        guard case .finish(let finished) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(!finished.keepAlive && machine.isClosed)
        #expect(finished.upstream?.pool == true, "the upstream got the whole request and answer")
    }

    @Test("A body within the replay buffer is kept, then sent by its length after the head; it stays for a replay")
    func keptBody() {
        var (machine, begin, request) = Self.began(.length(10))
        #expect(begin == .readBody(sendContinue: true))
        #expect(machine.step?.name == "reading")
        guard case .body(let reading, .length(10)) = machine.reading, reading === request else { Issue.record("not reading the body"); return }
        #expect(machine.keepsBodyForReplay)
        #expect(machine.bodyArrived(4) == .keep)
        #expect(machine.bodyArrived(6) == .keep)
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { _ in false }), "a kept body is read whatever the upstream")
        let (end, tellGuard) = machine.requestEnded()
        guard case .dispatch = end, tellGuard else { Issue.record("not dispatched"); return }
        guard case .nothing = machine.reading else { Issue.record("reads past the request"); return }
        _ = machine.tokenReady(for: request)
        #expect(
            machine.upstreamAttached(for: request, Connection(), reused: false)
                == .init(framing: .length(10), sendKept: true, dropKept: false, endChunked: false))
        #expect(!machine.wantsClientReads(pilingUp: true, upstreamWritable: { _ in true }), "requests sent ahead pile up")
    }

    @Test("A body that outgrows the replay buffer streams: sent as it arrives, chunked as it came, never replayed")
    func streamedBody() {
        var (machine, _, request) = Self.began(.chunked, replayLimit: 8)
        #expect(machine.bodyArrived(5) == .keep)
        #expect(machine.bodyArrived(5) == .keepAndDispatch)
        #expect(machine.step?.name == "waitingForToken")
        #expect(!machine.keepsBodyForReplay)
        #expect(machine.bodyArrived(3) == .keep, "kept until the upstream is there")
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { _ in true }), "nowhere to go yet")
        _ = machine.tokenReady(for: request)
        let connection = Connection()
        #expect(
            machine.upstreamAttached(for: request, connection, reused: false)
                == .init(framing: .chunked, sendKept: true, dropKept: true, endChunked: false))
        #expect(machine.exchange?.body == .streaming(waiting: 0, complete: false), "what was kept went upstream for good")
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { _ in true }))
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { _ in false }), "the upstream's backpressure reaches the client")
        #expect(machine.bodyArrived(2) == .forward(.chunked, connection))
        guard case (.endUpstreamBody(_, chunked: true), true) = machine.requestEnded() else { Issue.record("the body did not end"); return }
        #expect(machine.step?.upstream == Upstream(connection: connection, reused: false, requestComplete: true))
        #expect(Self.head(&machine, challenge: true) == .pass(keepAlive: true, tellGuard: false), "a streamed body cannot be sent again")
    }

    @Test("A streamed body that ends before its connection is there ends with the request's head; a body declared too long streams from its head")
    func streamedFromTheHead() {
        var (machine, begin, request) = Self.began(.length(100), streams: true, replayLimit: 8)
        #expect(begin == .dispatchAndStream(sendContinue: true))
        #expect(machine.bodyArrived(100) == .keep)
        guard case (.wait, true) = machine.requestEnded() else { Issue.record("not waiting"); return }
        _ = machine.tokenReady(for: request)
        #expect(
            machine.upstreamAttached(for: request, Connection(), reused: false)
                == .init(framing: .length(100), sendKept: true, dropKept: true, endChunked: false))

        var (chunked, _, second) = Self.began(.chunked, streams: true)
        _ = chunked.requestEnded()
        _ = chunked.tokenReady(for: second)
        #expect(chunked.upstreamAttached(for: second, Connection(), reused: false)?.endChunked == true, "the last chunk goes with the head")
    }

    @Test("A challenge is held by the machine, then replayed once with a newer token; a second challenge is passed on")
    func challengeReplayed() {
        var (machine, request, connection) = Self.sent()
        #expect(Self.head(&machine, challenge: true) == .hold)
        #expect(machine.holdsChallenge)
        guard case .hold = machine.answerBodyArrived(Self.bytes(100), mayKeep: Self.keep) else { Issue.record("not held"); return }
        guard case .holding(_, _, let held) = machine.step, held.body.readableBytes == 100 else {
            Issue.record("the body is not in the step"); return
        }
        guard case .challenged(let upstream) = machine.answerEnded() else { Issue.record("not challenged"); return }
        #expect(upstream.connection === connection && upstream.pool)
        #expect(machine.upstream == nil, "let go")
        guard case .replay("b") = machine.challenged(sentToken: "a", currentToken: "b", mayKeep: Self.keep) else { Issue.record("no replay"); return }
        #expect(machine.step?.name == "connecting")
        #expect(machine.upstreamAttached(for: request, Connection(), reused: false) != nil)
        #expect(Self.head(&machine, challenge: true) == .pass(keepAlive: true, tellGuard: false), "replayed once only")
    }

    @Test(
        "A challenge with the token it was sent waits for a refresh; one that brings nothing new passes it on, and one that ends late finds nothing")
    func challengeRefreshed() {
        var (machine, request, _) = Self.sent()
        _ = Self.head(&machine, challenge: true)
        _ = machine.answerBodyArrived(Self.bytes(3), mayKeep: Self.keep)
        _ = machine.answerEnded()
        guard case .refresh = machine.challenged(sentToken: "a", currentToken: "a", mayKeep: Self.keep) else { Issue.record("no refresh"); return }
        #expect(machine.step?.name == "refreshing")
        #expect(machine.refreshed("b", sentToken: "a", for: Request(), mayKeep: Self.keep) == nil, "another request's refresh")
        guard case .passOn(let ending, let held) = machine.refreshed("a", sentToken: "a", for: request, mayKeep: Self.keep) else {
            Issue.record("not passed on"); return
        }
        #expect(ending.keepAlive && ending.request === request && ending.upstream == nil)
        #expect(held.head.status == 202 && held.body.readableBytes == 3, "the answer as the upstream sent it")
        #expect(machine.refreshed("b", sentToken: "a", for: request, mayKeep: Self.keep) == nil, "a refresh that ends late finds nothing waiting")

        var (renewed, second, _) = Self.sent()
        _ = Self.head(&renewed, challenge: true, clientFraming: .decodedUntilClose)
        _ = renewed.answerEnded()
        _ = renewed.challenged(sentToken: "a", currentToken: nil, mayKeep: Self.keep)
        guard case .replay("b") = renewed.refreshed("b", sentToken: "a", for: second, mayKeep: Self.keep) else { Issue.record("no replay"); return }
        #expect(renewed.step?.name == "connecting")
    }

    @Test("A challenge's answer larger than what is held, or than the memory budget lets it keep, goes to the client at once")
    func challengeTooLarge() {
        var (machine, _, _) = Self.sent()
        _ = Self.head(&machine, challenge: true)
        guard case .hold = machine.answerBodyArrived(Self.bytes(Machine.maximumHeldChallenge), mayKeep: Self.keep) else {
            Issue.record("not held"); return
        }
        guard case .passHeld(let held, keepAlive: true, tellGuard: false) = machine.answerBodyArrived(Self.bytes(1), mayKeep: Self.keep) else {
            Issue.record("not passed"); return
        }
        #expect(held.body.readableBytes == Machine.maximumHeldChallenge + 1, "what was held, and what came")
        guard case .pass = machine.answerBodyArrived(Self.bytes(1), mayKeep: Self.keep) else { Issue.record("not passed"); return }
        guard case .finish = machine.answerEnded() else { Issue.record("not finished"); return }

        var (budget, _, _) = Self.sent()
        _ = Self.head(&budget, challenge: true)
        guard case .passHeld(_, keepAlive: false, _) = budget.answerBodyArrived(Self.bytes(1), mayHold: false, mayKeep: { false }) else {
            Issue.record("held past the budget"); return
        }
    }

    @Test("An upstream failure: an error answer, closing when the body was not all read; a close once the answer began")
    func upstreamFailures() {
        var (complete, request, connection) = Self.sent()
        guard case .answer(let ending) = complete.upstreamFailed(mayKeep: Self.keep) else { Issue.record("no answer"); return }
        #expect(ending.keepAlive && ending.request === request && !ending.tellGuard)
        #expect(ending.upstream?.connection === connection && ending.upstream?.pool == false, "the failed connection is closed")
        guard case .idle = complete.state else { Issue.record("not idle"); return }

        var (streaming, _, second) = Self.began(.length(100), streams: true)
        _ = streaming.tokenReady(for: second)
        guard case .answer(let closing) = streaming.upstreamFailed(mayKeep: Self.keep) else { Issue.record("no answer"); return }
        #expect(!closing.keepAlive && closing.tellGuard && streaming.isClosed, "the rest of the body is not read")

        var (answering, third, thirdConnection) = Self.sent()
        _ = Self.head(&answering)
        guard case .closeClient(let closed, let upstream) = answering.upstreamFailed(mayKeep: Self.keep) else { Issue.record("not closed"); return }
        #expect(closed === third && upstream === thirdConnection && answering.isClosed)
    }

    @Test(
        "TENANT15: a kept-alive connection that closed unanswered: an idempotent request or one of which nothing was written goes once more, any other is the upstream's failure"
    )
    func TENANT15_closedReusedConnection() {
        var (idempotent, request, first) = Self.sent(reused: true, idempotent: true)
        guard case .retry(let closing) = idempotent.upstreamClosed(wroteNothing: false), closing === first else { Issue.record("no retry"); return }
        #expect(idempotent.step?.name == "connecting")
        _ = idempotent.upstreamAttached(for: request, Connection(), reused: true)
        guard case .fail = idempotent.upstreamClosed(wroteNothing: true) else { Issue.record("retried twice"); return }

        var (post, _, _) = Self.sent(reused: true)
        guard case .fail = post.upstreamClosed(wroteNothing: false) else { Issue.record("a POST the upstream may have acted on went again"); return }
        var (unwritten, _, _) = Self.sent(reused: true)
        guard case .retry = unwritten.upstreamClosed(wroteNothing: true) else { Issue.record("nothing was written, and no retry"); return }

        var (new, _, _) = Self.sent(reused: false, idempotent: true)
        guard case .fail = new.upstreamClosed(wroteNothing: true) else {
            Issue.record("a new connection that closes is the upstream's failure"); return
        }

        var (answering, _, _) = Self.sent(reused: true, idempotent: true)
        _ = Self.head(&answering)
        guard case .closeClient = answering.upstreamClosed(wroteNothing: false) else { Issue.record("not closed"); return }

        var (streamed, _, third) = Self.began(.length(100), streams: true, idempotent: true)
        _ = streamed.tokenReady(for: third)
        _ = streamed.upstreamAttached(for: third, Connection(), reused: true)
        guard case .fail = streamed.upstreamClosed(wroteNothing: true) else { Issue.record("a streamed body is gone once sent: no retry"); return }
    }

    @Test("A challenge replay and a retry are each once: a replayed request may still be retried, and a retried one replayed")
    func replayAndRetry() {
        var (machine, request, _) = Self.sent(reused: true, idempotent: true)
        guard case .retry = machine.upstreamClosed(wroteNothing: false) else { Issue.record("no retry"); return }
        _ = machine.upstreamAttached(for: request, Connection(), reused: true)
        _ = Self.head(&machine, challenge: true)
        _ = machine.answerEnded()
        guard case .replay = machine.challenged(sentToken: "a", currentToken: "b", mayKeep: Self.keep) else {
            Issue.record("a retried request is replayed"); return
        }
        _ = machine.upstreamAttached(for: request, Connection(), reused: true)
        guard case .fail = machine.upstreamClosed(wroteNothing: true) else { Issue.record("retried twice"); return }
    }

    @Test("A broken body is answered while none of it went upstream, closed once part did; either way the connection ends")
    func brokenBody() {
        var (kept, _, request) = Self.began(.chunked)
        guard case .answer(let ending) = kept.bodyBroke() else { Issue.record("no answer"); return }
        #expect(!ending.keepAlive && ending.tellGuard && ending.request === request && kept.isClosed)

        var (streamed, _, second) = Self.began(.length(100), streams: true)
        _ = streamed.tokenReady(for: second)
        let connection = Connection()
        _ = streamed.upstreamAttached(for: second, connection, reused: false)
        guard case .closeClient(let closed, let upstream) = streamed.bodyBroke() else { Issue.record("answered after part went upstream"); return }
        #expect(closed === second && upstream === connection && streamed.isClosed)
    }

    @Test("A request that went upstream only in part is not pooled; the client's close ends everything")
    func partialRequestNotPooled() {
        var (machine, _, request) = Self.began(.length(100), streams: true)
        _ = machine.tokenReady(for: request)
        let connection = Connection()
        _ = machine.upstreamAttached(for: request, connection, reused: false)
        #expect(machine.step?.upstream == Upstream(connection: connection, reused: false, requestComplete: false))
        let closed = machine.closed()
        #expect(closed?.request === request && closed?.upstream === connection)
        #expect(machine.isClosed && machine.request == nil)
        #expect(machine.closed() == nil, "closed once")
        #expect(machine.tokenReady(for: request) == false && !machine.isConnecting(request), "a late callback finds nothing")
    }
}

extension ProxyConnectionMachine {
    var exchange: Exchange? {
        if case .active(let exchange) = state { return exchange }
        return nil
    }

    var step: Step? { exchange?.step }
}
