import Testing
import WAFHTTPWire
import WAFTestTraits

@testable import WAFTokenProxy

/// Every path through a proxy connection's state, without bytes or sockets.
@Suite("The proxy connection's state machine", .offPool)
struct ProxyConnectionMachineTests {
    /// What the driver keeps for a request: only its identity matters here.
    final class Request {}
    typealias Machine = ProxyConnectionMachine<Request>
    typealias Step = Machine.Step

    static func keep() -> Bool { true }

    /// A machine whose request's head arrived.
    static func began(
        _ framing: HTTPFraming = .none, streams: Bool = false, keepAlive: Bool = true, upgrade: Bool = false, replayLimit: Int = 1024
    ) -> (Machine, Machine.Begin, Request) {
        var machine = Machine()
        let request = Request()
        let begin = machine.requestBegan(
            request, framing: framing, streams: streams, keepAlive: keepAlive, upgrade: upgrade, expectsContinue: true, replayLimit: replayLimit)
        return (machine, begin, request)
    }

    /// A bodiless request sent on a new connection, its answer not yet come.
    static func sent(keepAlive: Bool = true, reused: Bool = false) -> (Machine, Request) {
        var (machine, _, request) = began(keepAlive: keepAlive)
        #expect(machine.tokenReady(for: request) == true)
        _ = machine.upstreamAttached(for: request, reused: reused)
        return (machine, request)
    }

    @Test("A request without a body: served at once, sent, answered, and the connection kept for the next")
    func bodilessRequest() {
        var (machine, begin, request) = Self.began()
        #expect(begin == .serve, "no 100 Continue without a body; the guard hears it is served")
        #expect(machine.servingBegins() == false, "the guard hears it once")
        #expect(machine.step == .waitingForToken)
        #expect(machine.tokenReady(for: Request()) == false, "another request's token")
        #expect(machine.tokenReady(for: request) == true)
        #expect(machine.step == .connecting)
        #expect(machine.tokenReady(for: request) == false, "a token comes once")
        #expect(machine.upstreamAttached(for: Request(), reused: false) == nil, "a connection for another request goes back")
        #expect(machine.upstreamAttached(for: request, reused: false) == .init(framing: .none, sendKept: false, dropKept: false, endChunked: false))
        #expect(machine.step == .sent(.init(reused: false, requestComplete: true)))
        #expect(machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream, mayKeep: Self.keep) == .pass(keepAlive: true))
        #expect(machine.answerBodyArrived(10, mayKeep: Self.keep) == .pass)
        guard case .finish(let ending, let pool) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(pool, "a whole request and answer: the connection goes back to its pool")
        #expect(ending.keepAlive && !ending.tellGuard && ending.request === request)
        guard case .idle = machine.state else { Issue.record("not idle: \(machine.state)"); return }
    }

    @Test("The connection closes after the answer when the client, an upgrade, an unframed answer or the driver says so")
    func whenTheConnectionCloses() {
        var (machine, _) = Self.sent(keepAlive: false)
        var asked = 0
        let counting = {
            asked += 1
            return true
        }
        #expect(machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream, mayKeep: counting) == .pass(keepAlive: false))
        #expect(asked == 0, "the driver's checks are not made when the answer already says close")
        guard case .finish(let ending, _) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(!ending.keepAlive && machine.isClosed)

        for (upgrade, framing, mayKeep) in [
            (true, ProxyRules.ClientFraming.asUpstream, true), (false, .decodedUntilClose, true), (false, .asUpstream, false),
        ] {
            var (machine, _, request) = Self.began(upgrade: upgrade)
            _ = machine.tokenReady(for: request)
            _ = machine.upstreamAttached(for: request, reused: false)
            #expect(
                machine.answerHeadArrived(challenge: false, clientFraming: framing, mayKeep: { mayKeep }) == .pass(keepAlive: false),
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
        _ = machine.upstreamAttached(for: request, reused: false)
        #expect(machine.bodyArrived(10) == .forward(.length(100)))
        #expect(machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream, mayKeep: Self.keep) == .pass(keepAlive: false))
        #expect(machine.bodyArrived(90) == .forward(.length(100)), "the body still goes while the answer does")
        #expect(machine.requestEnded() == .endUpstreamBody(chunked: false))
        guard case .finish(let ending, let pool) = machine.answerEnded() else { Issue.record("not finished"); return }
        #expect(!ending.keepAlive && machine.isClosed)
        #expect(pool, "the upstream got the whole request and answer")
    }

    @Test("A body within the replay buffer is kept, then sent by its length after the head; it stays for a replay")
    func keptBody() {
        var (machine, begin, request) = Self.began(.length(10))
        #expect(begin == .readBody(sendContinue: true))
        #expect(machine.step == .reading)
        guard case .body(let reading, .length(10)) = machine.reading, reading === request else { Issue.record("not reading the body"); return }
        #expect(machine.keepsBodyForReplay)
        #expect(machine.bodyArrived(4) == .keep)
        #expect(machine.bodyArrived(6) == .keep)
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { false }), "a kept body is read whatever the upstream")
        #expect(machine.requestEnded() == .dispatch)
        #expect(machine.servingBegins() == true)
        guard case .nothing = machine.reading else { Issue.record("reads past the request"); return }
        _ = machine.tokenReady(for: request)
        #expect(
            machine.upstreamAttached(for: request, reused: false) == .init(framing: .length(10), sendKept: true, dropKept: false, endChunked: false))
        #expect(!machine.wantsClientReads(pilingUp: true, upstreamWritable: { true }), "requests sent ahead pile up")
    }

    @Test("A body that outgrows the replay buffer streams: sent as it arrives, chunked as it came, never replayed")
    func streamedBody() {
        var (machine, _, request) = Self.began(.chunked, replayLimit: 8)
        #expect(machine.bodyArrived(5) == .keep)
        #expect(machine.bodyArrived(5) == .keepAndDispatch)
        #expect(machine.step == .waitingForToken)
        #expect(!machine.keepsBodyForReplay)
        #expect(machine.bodyArrived(3) == .keep, "kept until the upstream is there")
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { true }), "nowhere to go yet")
        _ = machine.tokenReady(for: request)
        #expect(machine.upstreamAttached(for: request, reused: false) == .init(framing: .chunked, sendKept: true, dropKept: true, endChunked: false))
        #expect(machine.exchange?.body == .streaming(waiting: 0, complete: false), "what was kept went upstream for good")
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { true }))
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { false }), "the upstream's backpressure reaches the client")
        #expect(machine.bodyArrived(2) == .forward(.chunked))
        #expect(machine.requestEnded() == .endUpstreamBody(chunked: true))
        #expect(machine.step == .sent(.init(reused: false, requestComplete: true)))
        #expect(
            machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep) == .pass(keepAlive: true),
            "a streamed body cannot be sent again")
    }

    @Test("A streamed body that ends before its connection is there ends with the request's head; a body declared too long streams from its head")
    func streamedFromTheHead() {
        var (machine, begin, request) = Self.began(.length(100), streams: true, replayLimit: 8)
        #expect(begin == .dispatchAndStream(sendContinue: true))
        #expect(machine.bodyArrived(100) == .keep)
        #expect(machine.requestEnded() == .wait)
        _ = machine.tokenReady(for: request)
        #expect(
            machine.upstreamAttached(for: request, reused: false) == .init(framing: .length(100), sendKept: true, dropKept: true, endChunked: false))

        var (chunked, _, second) = Self.began(.chunked, streams: true)
        #expect(chunked.requestEnded() == .wait)
        _ = chunked.tokenReady(for: second)
        #expect(chunked.upstreamAttached(for: second, reused: false)?.endChunked == true, "the last chunk goes with the head")
    }

    @Test("A challenge is held, then replayed once with a newer token; a second challenge is passed on")
    func challengeReplayed() {
        var (machine, request) = Self.sent()
        #expect(machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep) == .hold)
        #expect(machine.holdsChallenge)
        #expect(machine.answerBodyArrived(100, mayKeep: Self.keep) == .hold)
        guard case .challenged(let pool) = machine.answerEnded() else { Issue.record("not challenged"); return }
        #expect(pool)
        guard case .replay("b") = machine.challenged(sentToken: "a", currentToken: "b", mayKeep: Self.keep) else { Issue.record("no replay"); return }
        #expect(machine.step == .connecting)
        #expect(machine.upstreamAttached(for: request, reused: false) != nil)
        #expect(
            machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep) == .pass(keepAlive: true), "replayed once only"
        )
    }

    @Test(
        "A challenge with the token it was sent waits for a refresh; one that brings nothing new passes it on, and one that ends late finds nothing")
    func challengeRefreshed() {
        var (machine, request) = Self.sent()
        _ = machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep)
        _ = machine.answerEnded()
        guard case .refresh = machine.challenged(sentToken: "a", currentToken: "a", mayKeep: Self.keep) else { Issue.record("no refresh"); return }
        #expect(machine.step == .refreshing(framing: .asUpstream))
        #expect(machine.refreshed("b", sentToken: "a", for: Request(), mayKeep: Self.keep) == nil, "another request's refresh")
        guard case .passOn(let ending) = machine.refreshed("a", sentToken: "a", for: request, mayKeep: Self.keep) else {
            Issue.record("not passed on"); return
        }
        #expect(ending.keepAlive && ending.request === request)
        #expect(machine.refreshed("b", sentToken: "a", for: request, mayKeep: Self.keep) == nil, "a refresh that ends late finds nothing waiting")

        var (renewed, second) = Self.sent()
        _ = renewed.answerHeadArrived(challenge: true, clientFraming: .decodedUntilClose, mayKeep: Self.keep)
        _ = renewed.answerEnded()
        _ = renewed.challenged(sentToken: "a", currentToken: nil, mayKeep: Self.keep)
        guard case .replay("b") = renewed.refreshed("b", sentToken: "a", for: second, mayKeep: Self.keep) else { Issue.record("no replay"); return }
        #expect(renewed.step == .connecting)
    }

    @Test("A challenge's answer larger than what is held, or than the memory budget lets it keep, goes to the client at once")
    func challengeTooLarge() {
        var (machine, _) = Self.sent()
        _ = machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep)
        #expect(machine.answerBodyArrived(Machine.maximumHeldChallenge, mayKeep: Self.keep) == .hold)
        #expect(machine.answerBodyArrived(1, mayKeep: Self.keep) == .passHeld(keepAlive: true))
        #expect(machine.answerBodyArrived(1, mayKeep: Self.keep) == .pass)
        guard case .finish = machine.answerEnded() else { Issue.record("not finished"); return }

        var (budget, _) = Self.sent()
        _ = budget.answerHeadArrived(challenge: true, clientFraming: .asUpstream, mayKeep: Self.keep)
        #expect(budget.answerBodyArrived(1, mayHold: false, mayKeep: { false }) == .passHeld(keepAlive: false))
    }

    @Test("An upstream failure: an error answer, closing when the body was not all read; a close once the answer began")
    func upstreamFailures() {
        var (complete, request) = Self.sent()
        guard case .answer(let ending) = complete.upstreamFailed(mayKeep: Self.keep) else { Issue.record("no answer"); return }
        #expect(ending.keepAlive && ending.request === request && !ending.tellGuard)
        guard case .idle = complete.state else { Issue.record("not idle"); return }

        var (streaming, _, second) = Self.began(.length(100), streams: true)
        _ = streaming.tokenReady(for: second)
        guard case .answer(let closing) = streaming.upstreamFailed(mayKeep: Self.keep) else { Issue.record("no answer"); return }
        #expect(!closing.keepAlive && closing.tellGuard && streaming.isClosed, "the rest of the body is not read")

        var (answering, third) = Self.sent()
        _ = answering.answerHeadArrived(challenge: false, clientFraming: .asUpstream, mayKeep: Self.keep)
        guard case .closeClient(let closed) = answering.upstreamFailed(mayKeep: Self.keep) else { Issue.record("not closed"); return }
        #expect(closed === third && answering.isClosed)
    }

    @Test("A reused connection the upstream closed before answering is tried once more on a new one")
    func closedReusedConnection() {
        var (machine, request) = Self.sent(reused: true)
        guard case .retry = machine.upstreamClosed() else { Issue.record("no retry"); return }
        #expect(machine.step == .connecting)
        _ = machine.upstreamAttached(for: request, reused: true)
        guard case .fail = machine.upstreamClosed() else { Issue.record("retried twice"); return }

        var (new, _) = Self.sent(reused: false)
        guard case .fail = new.upstreamClosed() else { Issue.record("a new connection that closes is the upstream's failure"); return }

        var (answering, _) = Self.sent(reused: true)
        _ = answering.answerHeadArrived(challenge: false, clientFraming: .asUpstream, mayKeep: Self.keep)
        guard case .closeClient = answering.upstreamClosed() else { Issue.record("not closed"); return }
    }

    @Test("A broken body is answered while none of it went upstream, closed once part did; either way the connection ends")
    func brokenBody() {
        var (kept, _, request) = Self.began(.chunked)
        guard case .answer(let ending) = kept.bodyBroke() else { Issue.record("no answer"); return }
        #expect(!ending.keepAlive && ending.tellGuard && ending.request === request && kept.isClosed)

        var (streamed, _, second) = Self.began(.length(100), streams: true)
        _ = streamed.tokenReady(for: second)
        _ = streamed.upstreamAttached(for: second, reused: false)
        guard case .closeClient(let closed) = streamed.bodyBroke() else { Issue.record("answered after part went upstream"); return }
        #expect(closed === second && streamed.isClosed)
    }

    @Test("A request that went upstream only in part is not pooled; the client's close ends everything")
    func partialRequestNotPooled() {
        var (machine, _, request) = Self.began(.length(100), streams: true)
        _ = machine.tokenReady(for: request)
        _ = machine.upstreamAttached(for: request, reused: false)
        #expect(machine.step == .sent(.init(reused: false, requestComplete: false)))
        #expect(machine.closed() === request)
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
