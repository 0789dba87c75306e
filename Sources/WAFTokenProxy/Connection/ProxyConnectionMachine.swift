import NIOCore
import WAFHTTPWire

/// One proxy connection's state as a value: each thing the connection meets (a request's head or
/// body, a token, an upstream connection, the upstream's answer, a challenge, a failure, a close)
/// is an event that changes it and returns what the driver (`ProxyConnection`) must do. It does
/// no I/O and holds no timers. The request in progress is here, once: its upstream connection and
/// a challenge's held answer live in the step that has them (`+States`), and nowhere else; the
/// state is changed by these events only, all in this file. An event the driver cannot send in a
/// state is a `preconditionFailure` (the model is SwiftNIO's state machines). Callbacks that may
/// come late (a token, a connection, a refresh) name their request and are told when it is gone.
/// Every path is tested directly (`ProxyConnectionMachineTests`).
struct ProxyConnectionMachine<Request: AnyObject, Connection: AnyObject> {
    private(set) var state = State.idle

    /// A challenge's answer is kept up to this size to be passed on unchanged if no replay
    /// happens; a larger one is passed on at once.
    static var maximumHeldChallenge: Int { 1 << 20 }

    /// The request in progress, changed in place; `event` names what came without one.
    private func active(_ event: StaticString) -> Exchange {
        guard case .active(let exchange) = state else { preconditionFailure("\(event) without a request") }
        return exchange
    }

    var request: Request? {
        if case .active(let exchange) = state { return exchange.request }
        return nil
    }

    /// The upstream connection the request is on, if any.
    var upstream: Connection? {
        if case .active(let exchange) = state { return exchange.step.upstream?.connection }
        return nil
    }

    /// Whether the request waits on an upstream connection it has (sent, a challenge arriving, an
    /// answer going), or one being made: only then can the upstream time out.
    var waitsOnUpstream: Bool {
        guard case .active(let exchange) = state else { return false }
        if case .connecting = exchange.step { return true }
        return exchange.step.upstream != nil
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// What the client's bytes are now.
    var reading: Reading {
        switch state {
        case .idle: .head
        case .active(let exchange): exchange.body.complete ? .nothing : .body(exchange.request, exchange.framing)
        case .closed: .nothing
        }
    }

    /// Whether the client is read: not while a streamed body has nowhere to go, nor while requests
    /// sent ahead of their turn pile up (`pilingUp`: more than a head's worth of them is waiting).
    func wantsClientReads(pilingUp: Bool, upstreamWritable: (Connection) -> Bool) -> Bool {
        guard case .active(let exchange) = state else { return true }
        switch exchange.body {
        case .kept(_, false): return true
        case .kept(_, true), .streaming(_, true): return !pilingUp
        case .streaming(_, false): return exchange.step.upstream.map { upstreamWritable($0.connection) } ?? false
        }
    }

    /// Whether body bytes that arrive now would be kept for a replay (the budget is asked first).
    var keepsBodyForReplay: Bool {
        if case .active(let exchange) = state, case .kept = exchange.body { return true }
        return false
    }

    /// Whether answer bytes that arrive now would be held with a challenge (the budget is asked first).
    var holdsChallenge: Bool {
        if case .active(let exchange) = state, case .holding = exchange.step { return true }
        return false
    }

    // MARK: The client's request

    /// A request head that passed every check.
    mutating func requestBegan(
        _ request: Request, framing: HTTPFraming, streams: Bool, keepAlive: Bool, upgrade: Bool, expectsContinue: Bool, replayLimit: Int,
        idempotent: Bool
    ) -> Begin {
        guard case .idle = state else { preconditionFailure("a request's head while another is in progress") }
        let complete = framing == .none
        state = .active(
            Exchange(
                request: request, framing: framing, keepAlive: keepAlive && !upgrade, replayLimit: replayLimit, idempotent: idempotent,
                body: streams && !complete ? .streaming(waiting: 0, complete: false) : .kept(bytes: 0, complete: complete),
                step: streams || complete ? .waitingForToken(.once) : .reading))
        if complete { return .serve }
        return streams ? .dispatchAndStream(sendContinue: expectsContinue) : .readBody(sendContinue: expectsContinue)
    }

    /// `mayKeep`: whether the memory budget lets the driver keep these bytes for a replay; past
    /// it the body streams, as one past the replay buffer does (TENANT-12).
    mutating func bodyArrived(_ count: Int, mayKeep: Bool = true) -> BodyPiece {
        let exchange = active("a request's body")
        switch exchange.body {
        case .kept(let kept, false):
            guard kept + count > exchange.replayLimit || !mayKeep else {
                exchange.body = .kept(bytes: kept + count, complete: false)
                return .keep
            }
            exchange.body = .streaming(waiting: kept + count, complete: false)
            exchange.step = .waitingForToken(.once)
            return .keepAndDispatch
        case .streaming(let waiting, false):
            if let upstream = exchange.step.upstream { return .forward(exchange.upstreamFraming, upstream.connection) }
            exchange.body = .streaming(waiting: waiting + count, complete: false)
            return .keep
        default:
            preconditionFailure("body after the request's end")
        }
    }

    /// The client's request was read to its end: the guard hears that it is being served (its
    /// request timeout, which bounds the head and the whole body, stops: TENANT-6), unless its
    /// answer began already.
    mutating func requestEnded() -> (RequestEnd, tellGuard: Bool) {
        let exchange = active("a request's end")
        let tellGuard = !exchange.serving
        switch exchange.body {
        case .kept(let kept, false):
            exchange.body = .kept(bytes: kept, complete: true)
            exchange.step = .waitingForToken(.once)
            return (.dispatch, tellGuard)
        case .streaming(let waiting, false):
            exchange.body = .streaming(waiting: waiting, complete: true)
            let chunked = exchange.upstreamFraming == .chunked
            switch exchange.step {
            case .sent(var upstream, let sendings):
                upstream.requestComplete = true
                exchange.step = .sent(upstream, sendings)
                return (.endUpstreamBody(upstream.connection, chunked: chunked), tellGuard)
            case .answering(var upstream, let keeps):
                upstream.requestComplete = true
                exchange.step = .answering(upstream, keeps: keeps)
                return (.endUpstreamBody(upstream.connection, chunked: chunked), tellGuard)
            default:
                return (.wait, tellGuard)
            }
        default:
            preconditionFailure("a request ended twice")
        }
    }

    // MARK: A token and a connection

    /// The token the request waited for is there (or the wait ended): false when `request` is no
    /// longer waiting for one.
    mutating func tokenReady(for request: Request) -> Bool {
        guard case .active(let exchange) = state, exchange.request === request, case .waitingForToken(let sendings) = exchange.step else {
            return false
        }
        exchange.step = .connecting(sendings)
        return true
    }

    /// Whether `request` is the one in progress, waiting for its upstream connection.
    func isConnecting(_ request: Request) -> Bool {
        guard case .active(let exchange) = state, exchange.request === request, case .connecting = exchange.step else { return false }
        return true
    }

    /// `connection` is there for `request` (new, or `reused` from the pool). Nil when that request
    /// is no longer connecting: the connection goes back.
    mutating func upstreamAttached(for request: Request, _ connection: Connection, reused: Bool) -> Attach? {
        guard case .active(let exchange) = state, exchange.request === request, case .connecting(let sendings) = exchange.step else { return nil }
        let framing = exchange.upstreamFraming
        let attach: Attach
        switch exchange.body {
        case .kept(let bytes, _):
            attach = Attach(framing: framing, sendKept: bytes > 0, dropKept: false, endChunked: false)
        case .streaming(let waiting, let complete):
            attach = Attach(framing: framing, sendKept: waiting > 0, dropKept: true, endChunked: complete && framing == .chunked)
            exchange.body = .streaming(waiting: 0, complete: complete)
        }
        exchange.step = .sent(Upstream(connection: connection, reused: reused, requestComplete: exchange.body.complete), sendings)
        return attach
    }

    // MARK: The answer

    /// The answer's head. `challenge`: it is one (ProxyRules.isChallenge).
    mutating func answerHeadArrived(
        _ head: HTTPHead, framing: HTTPFraming, challenge: Bool, clientFraming: ProxyRules.ClientFraming, mayKeep: () -> Bool
    ) -> AnswerHead {
        let exchange = active("an answer's head")
        guard case .sent(let upstream, let sendings) = exchange.step else { preconditionFailure("an answer's head in \(exchange.step.name)") }
        if challenge, exchange.replayable, sendings.mayReplay {
            exchange.step = .holding(upstream, sendings, HeldAnswer(head: head, framing: framing, clientFraming: clientFraming, body: ByteBuffer()))
            return .hold
        }
        let keeps = Self.keeps(exchange, clientFraming, mayKeep)
        let tellGuard = !exchange.serving
        exchange.step = .answering(upstream, keeps: keeps)
        return .pass(keepAlive: keeps, tellGuard: tellGuard)
    }

    /// `mayHold`: whether the memory budget lets the machine hold these bytes of a challenge;
    /// past it the challenge is passed on, as one too large to hold is (TENANT-12).
    mutating func answerBodyArrived(_ bytes: ByteBuffer, mayHold: Bool = true, mayKeep: () -> Bool) -> AnswerBody {
        let exchange = active("an answer's body")
        switch exchange.step {
        case .answering:
            return .pass
        case .holding(let upstream, let sendings, var held):
            exchange.step = .reading  // holds nothing while `held` changes
            var bytes = bytes
            held.body.writeBuffer(&bytes)
            guard held.body.readableBytes > Self.maximumHeldChallenge || !mayHold else {
                exchange.step = .holding(upstream, sendings, held)
                return .hold
            }
            let keeps = Self.keeps(exchange, held.clientFraming, mayKeep)
            let tellGuard = !exchange.serving
            exchange.step = .answering(upstream, keeps: keeps)
            return .passHeld(held, keepAlive: keeps, tellGuard: tellGuard)
        default:
            preconditionFailure("an answer's body in \(exchange.step.name)")
        }
    }

    mutating func answerEnded() -> AnswerEnd {
        let exchange = active("an answer's end")
        switch exchange.step {
        case .answering(let upstream, let keeps):
            return .finish(end(exchange, keepAlive: keeps, upstream: (upstream.connection, upstream.requestComplete)))
        case .holding(let upstream, let sendings, let held):
            exchange.step = .challenged(held, sendings)
            return .challenged(upstream: (upstream.connection, upstream.requestComplete))
        default:
            preconditionFailure("an answer's end in \(exchange.step.name)")
        }
    }

    // MARK: Challenges

    /// A challenge's answer is held: passed on, replayed with a newer token, or a refresh first.
    mutating func challenged(sentToken: String?, currentToken: String?, mayKeep: () -> Bool) -> Challenge {
        let exchange = active("a challenge")
        guard case .challenged(let held, let sendings) = exchange.step else { preconditionFailure("a challenge decided with none held") }
        switch ProxyRules.afterChallenge(
            replayable: exchange.replayable, replayed: !sendings.mayReplay, sentToken: sentToken, currentToken: currentToken)
        {
        case .passOn:
            return .passOn(end(exchange, keepAlive: Self.keeps(exchange, held.clientFraming, mayKeep), upstream: nil), held)
        case .replay(let token):
            exchange.step = .connecting(sendings.afterReplay)
            return .replay(token: token)
        case .refresh:
            exchange.step = .refreshing(held, sendings)
            return .refresh
        }
    }

    /// The refresh a challenge asked for ended with `token`. Nil when `request` is no longer
    /// waiting for it (the connection closed).
    mutating func refreshed(_ token: String?, sentToken: String?, for request: Request, mayKeep: () -> Bool) -> Challenge? {
        guard case .active(let exchange) = state, exchange.request === request, case .refreshing(let held, let sendings) = exchange.step else {
            return nil
        }
        guard case .replay(let token) = ProxyRules.afterRefresh(token, sentToken: sentToken) else {
            return .passOn(end(exchange, keepAlive: Self.keeps(exchange, held.clientFraming, mayKeep), upstream: nil), held)
        }
        exchange.step = .connecting(sendings.afterReplay)
        return .replay(token: token)
    }

    // MARK: Failures and closes

    /// A request head the proxy refuses to read on: its error is answered, then the connection closes.
    mutating func refuse() -> Ending {
        guard case .idle = state else { preconditionFailure("a head refused while a request is in progress") }
        state = .closed
        return Ending(request: nil, keepAlive: false, tellGuard: true, upstream: nil)
    }

    /// The request's body cannot be read on (malformed chunks): an error answers it, then the
    /// connection closes; once part of it went upstream, it can only be closed.
    mutating func bodyBroke() -> Failure {
        guard case .active(let exchange) = state, !exchange.body.complete else { preconditionFailure("a broken body with none arriving") }
        state = .closed
        if let upstream = exchange.step.upstream { return .closeClient(exchange.request, upstream: upstream.connection) }
        return .answer(Ending(request: exchange.request, keepAlive: false, tellGuard: !exchange.serving, upstream: nil))
    }

    /// The upstream cannot answer (unreachable, closed, timed out): an error answer while nothing
    /// of an answer went out (the connection goes on only if the request's body was read to its
    /// end, and `mayKeep`), a close after. The request's upstream connection, if any, is closed.
    mutating func upstreamFailed(mayKeep: () -> Bool) -> Failure {
        let exchange = active("an upstream failure")
        switch exchange.step {
        case .connecting, .sent, .holding:
            let closing = exchange.step.upstream.map { ($0.connection, false) }
            return .answer(end(exchange, keepAlive: exchange.keepAlive && exchange.body.complete && mayKeep(), upstream: closing))
        case .answering(let upstream, _):
            state = .closed
            return .closeClient(exchange.request, upstream: upstream.connection)
        case .reading, .waitingForToken, .challenged, .refreshing:
            preconditionFailure("an upstream failure in \(exchange.step.name), with no upstream asked")
        }
    }

    /// The request's upstream connection closed before its answer ended. `wroteNothing`: not one
    /// byte of the request reached it. A kept-alive connection may have been closed by the
    /// upstream just as the request went: the request goes once more on a new one only when the
    /// upstream cannot have acted on it (nothing written), or acting twice is harmless (an
    /// idempotent method), as nginx's `proxy_next_upstream` and Go's transport decide (TENANT-15).
    mutating func upstreamClosed(wroteNothing: Bool) -> Closed {
        let exchange = active("an upstream close")
        switch exchange.step {
        case .sent(let upstream, let sendings):
            guard upstream.reused, sendings.mayRetry, exchange.replayable, wroteNothing || exchange.idempotent else { return .fail }
            exchange.step = .connecting(sendings.afterRetry)
            return .retry(upstream: upstream.connection)
        case .holding:
            return .fail
        case .answering(let upstream, _):
            state = .closed
            return .closeClient(exchange.request, upstream: upstream.connection)
        case .reading, .waitingForToken, .connecting, .challenged, .refreshing:
            preconditionFailure("an upstream close in \(exchange.step.name), with no upstream attached")
        }
    }

    /// The client left, or the connection cannot go on: the request in progress, if any, and its
    /// upstream connection (an answer in the middle cannot be reused), to be closed.
    mutating func closed() -> (request: Request, upstream: Connection?)? {
        defer { state = .closed }
        guard case .active(let exchange) = state else { return nil }
        return (exchange.request, exchange.step.upstream?.connection)
    }

    // MARK: How a request ends

    /// Whether the connection may carry another request after this answer: not when either side
    /// asked to close, when the answer's body ends with the close, when the request's body was not
    /// read to its end (what follows would be read as a request), nor when `mayKeep` says no (the
    /// daemon stops, or a reload took the peer's access away, TENANT-3).
    private static func keeps(_ exchange: Exchange, _ framing: ProxyRules.ClientFraming, _ mayKeep: () -> Bool) -> Bool {
        exchange.keepAlive && exchange.body.complete && framing == .asUpstream && mayKeep()
    }

    /// The request is done: the next one, or the connection's end.
    private mutating func end(_ exchange: Exchange, keepAlive: Bool, upstream: (Connection, Bool)?) -> Ending {
        state = keepAlive ? .idle : .closed
        return Ending(request: exchange.request, keepAlive: keepAlive, tellGuard: !exchange.serving, upstream: upstream)
    }
}
