import Testing
import WAFHTTPWire
import WAFTestTraits

@testable import WAFTokenProxy

/// Every path through a proxy connection's state, without bytes or sockets.
@Suite("The proxy connection's state machine", .offPool)
struct ProxyConnectionMachineTests {
    typealias Machine = ProxyConnectionMachine

    /// A machine whose request's head arrived.
    static func began(
        _ framing: HTTPFraming = .none, streams: Bool = false, keepAlive: Bool = true, upgrade: Bool = false, replayLimit: Int = 1024
    ) -> (Machine, Machine.Begin) {
        var machine = Machine()
        let begin = machine.requestBegan(
            framing: framing, streams: streams, keepAlive: keepAlive, upgrade: upgrade, expectsContinue: true, replayLimit: replayLimit)
        return (machine, begin)
    }

    /// A bodiless request sent on a new connection, its answer not yet come.
    static func sent(keepAlive: Bool = true, reused: Bool = false) -> Machine {
        var (machine, _) = began(keepAlive: keepAlive)
        _ = machine.servingBegins()
        machine.dispatching()
        machine.connecting()
        _ = machine.upstreamAttached(reused: reused)
        return machine
    }

    @Test("A request without a body: served at once, sent, answered, and the connection kept for the next")
    func bodilessRequest() {
        var (machine, begin) = Self.began()
        #expect(begin == .serve, "no 100 Continue without a body")
        #expect(machine.servingBegins() == true)
        #expect(machine.servingBegins() == false, "the guard hears it once")
        machine.dispatching()
        #expect(machine.phase == .waitingForToken)
        #expect(machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream) == .fail, "an answer before the request went")
        machine.connecting()
        #expect(machine.phase == .connecting)
        #expect(machine.upstreamAttached(reused: false) == .init(framing: .none, sendKept: false, dropKept: false, endChunked: false))
        #expect(machine.phase == .awaitingAnswer)
        #expect(machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream) == .pass)
        #expect(machine.answering)
        #expect(machine.answerHeadGoes(mayKeep: { true }) == true)
        #expect(machine.answerBodyArrived(10) == .pass)
        #expect(machine.answerEnded() == .finish)
        #expect(machine.upstreamDetached() == true, "a whole request and answer: the connection goes back to its pool")
        #expect(machine.answerFinished() == true)
        #expect(machine.exchange == nil && !machine.closing && !machine.serving)
    }

    @Test("The connection closes after the answer when the client, an upgrade, a refusal, an unframed answer or the driver says so")
    func whenTheConnectionCloses() {
        var machine = Self.sent(keepAlive: false)
        _ = machine.answerHeadArrived(challenge: false, clientFraming: .asUpstream)
        var asked = 0
        #expect(
            machine.answerHeadGoes(mayKeep: {
                asked += 1; return true
            }) == false)
        #expect(asked == 0, "the driver's checks are not made when the answer already says close")
        #expect(machine.answerFinished() == false)
        #expect(machine.closing)

        var upgrade = Self.began(upgrade: true).0
        #expect(upgrade.answerHeadGoes(mayKeep: { true }) == false)

        var decoded = Self.sent()
        _ = decoded.answerHeadArrived(challenge: false, clientFraming: .decodedUntilClose)
        #expect(decoded.answerHeadGoes(mayKeep: { true }) == false, "a body that ends with the close")

        var stopping = Self.sent()
        _ = stopping.answerHeadArrived(challenge: false, clientFraming: .asUpstream)
        #expect(stopping.answerHeadGoes(mayKeep: { false }) == false, "the daemon stops, or the peer lost its access")

        var refused = Machine()
        refused.refuse()
        #expect(refused.closing)
        #expect(refused.answerHeadGoes(mayKeep: { true }) == false)
    }

    @Test("A body within the replay buffer is kept, then sent by its length after the head; it stays for a replay")
    func keptBody() {
        var (machine, begin) = Self.began(.length(10))
        #expect(begin == .readBody(sendContinue: true))
        #expect(machine.bodyArrived(4) == .keep)
        #expect(machine.bodyArrived(6) == .keep)
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { false }), "a kept body is read whatever the upstream")
        #expect(machine.requestEnded() == .dispatch)
        machine.dispatching()
        machine.connecting()
        #expect(machine.upstreamAttached(reused: false) == .init(framing: .length(10), sendKept: true, dropKept: false, endChunked: false))
        #expect(!machine.wantsClientReads(pilingUp: true, upstreamWritable: { true }), "requests sent ahead pile up")
    }

    @Test("A body that outgrows the replay buffer streams: sent as it arrives, chunked as it came, never replayed")
    func streamedBody() {
        var (machine, _) = Self.began(.chunked, replayLimit: 8)
        #expect(machine.bodyArrived(5) == .keep)
        #expect(machine.bodyArrived(5) == .keepAndDispatch)
        #expect(machine.bodyArrived(3) == .keep, "kept until the upstream is there")
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { true }), "nowhere to go yet")
        machine.dispatching()
        machine.connecting()
        #expect(machine.upstreamAttached(reused: false) == .init(framing: .chunked, sendKept: true, dropKept: true, endChunked: false))
        #expect(machine.phase == .receiving)
        #expect(machine.exchange?.kept == 0, "what was kept went upstream for good")
        #expect(machine.wantsClientReads(pilingUp: false, upstreamWritable: { true }))
        #expect(!machine.wantsClientReads(pilingUp: false, upstreamWritable: { false }), "the upstream's backpressure reaches the client")
        #expect(machine.bodyArrived(2) == .forward)
        #expect(machine.requestEnded() == .endUpstreamBody(chunked: true))
        #expect(machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream) == .pass, "a streamed body cannot be sent again")
    }

    @Test("A body declared too long for the buffer streams from its head, by its length")
    func streamedFromTheHead() {
        var (machine, begin) = Self.began(.length(100), streams: true, replayLimit: 8)
        #expect(begin == .dispatchAndStream(sendContinue: true))
        machine.dispatching()
        machine.connecting()
        #expect(machine.upstreamAttached(reused: false) == .init(framing: .length(100), sendKept: false, dropKept: true, endChunked: false))
        #expect(machine.bodyArrived(100) == .forward)
        #expect(machine.requestEnded() == .endUpstreamBody(chunked: false))
    }

    @Test("A challenge is held, then replayed once with a newer token; a second challenge is passed on")
    func challengeReplayed() {
        var machine = Self.sent()
        #expect(machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream) == .hold)
        #expect(machine.phase == .holdingChallenge)
        #expect(machine.answerBodyArrived(100) == .hold)
        #expect(machine.answerEnded() == .challenged)
        #expect(machine.upstreamDetached() == true)
        #expect(machine.challenged(sentToken: "a", currentToken: "b") == .replay(token: "b"))
        #expect(machine.phase == .connecting)
        #expect(machine.upstreamAttached(reused: false) != nil)
        #expect(machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream) == .pass, "replayed once only")
    }

    @Test("A challenge with the token it was sent waits for a refresh; a refresh that brings nothing new passes it on")
    func challengeRefreshed() {
        var machine = Self.sent()
        _ = machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream)
        _ = machine.answerEnded()
        #expect(machine.challenged(sentToken: "a", currentToken: "a") == .refresh)
        #expect(machine.phase == .refreshing)
        #expect(machine.refreshed("a", sentToken: "a") == .passOn)
        #expect(machine.answering)
        #expect(machine.refreshed("b", sentToken: "a") == nil, "a refresh that ends late finds nothing waiting")

        var renewed = Self.sent()
        _ = renewed.answerHeadArrived(challenge: true, clientFraming: .asUpstream)
        _ = renewed.challenged(sentToken: "a", currentToken: nil)
        #expect(renewed.refreshed("b", sentToken: "a") == .replay(token: "b"))
        #expect(renewed.phase == .connecting)
    }

    @Test("A challenge's answer larger than what is held goes to the client at once")
    func challengeTooLarge() {
        var machine = Self.sent()
        _ = machine.answerHeadArrived(challenge: true, clientFraming: .asUpstream)
        #expect(machine.answerBodyArrived(Machine.maximumHeldChallenge) == .hold)
        #expect(machine.answerBodyArrived(1) == .passHeld)
        #expect(machine.answerBodyArrived(1) == .pass)
        #expect(machine.answerEnded() == .finish)
    }

    @Test("An upstream failure: an error answer, closing when the body was not all read; a close once the answer began")
    func upstreamFailures() {
        var complete = Self.sent()
        #expect(complete.upstreamFailed() == .answer(closeAfter: false))
        #expect(!complete.closing)
        #expect(complete.upstreamDetached() == false, "nothing left to give back")

        var streaming = Self.began(.length(100), streams: true).0
        streaming.dispatching()
        #expect(streaming.upstreamFailed() == .answer(closeAfter: true))
        #expect(streaming.closing)

        var answering = Self.sent()
        _ = answering.answerHeadArrived(challenge: false, clientFraming: .asUpstream)
        #expect(answering.upstreamFailed() == .closeClient)
        #expect(Machine().upstreamFailedOnNothing)
    }

    @Test("A reused connection the upstream closed before answering is tried once more on a new one")
    func closedReusedConnection() {
        var machine = Self.sent(reused: true)
        #expect(machine.upstreamClosed() == .retry)
        #expect(machine.upstreamClosed() == .none, "no connection to close any more")
        machine.connecting()
        _ = machine.upstreamAttached(reused: true)
        #expect(machine.upstreamClosed() == .fail, "once only")

        var new = Self.sent(reused: false)
        #expect(new.upstreamClosed() == .fail, "a new connection that closes is the upstream's failure")

        var answering = Self.sent(reused: true)
        _ = answering.answerHeadArrived(challenge: false, clientFraming: .asUpstream)
        #expect(answering.upstreamClosed() == .closeClient)
    }

    @Test("A request that went upstream only in part: detached, its connection is closed, not pooled")
    func partialRequestNotPooled() {
        var (machine, _) = Self.began(.length(100), streams: true)
        machine.connecting()
        _ = machine.upstreamAttached(reused: false)
        #expect(machine.requestReachedUpstream)
        #expect(machine.upstreamDetached() == false)
        #expect(machine.closed() == false, "detached already")
        #expect(machine.closing && machine.exchange == nil)
    }
}

extension ProxyConnectionMachine {
    /// An upstream failure with no request in progress changes nothing.
    fileprivate var upstreamFailedOnNothing: Bool {
        var copy = self
        return copy.upstreamFailed() == .none && copy.exchange == nil && !copy.closing
    }
}
