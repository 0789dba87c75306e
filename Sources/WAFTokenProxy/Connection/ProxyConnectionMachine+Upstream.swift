/// The upstream's side of a proxy connection: a token and a connection, the answer, a challenge
/// and its replay, failures, and how each request ends.
extension ProxyConnectionMachine {
    /// The request's answer is written whole now (an error of the proxy's own, or a held challenge
    /// passed on), or the upstream's ended: the machine has moved on to the next request, or closed.
    struct Ending {
        /// The request that ended (nil: one refused before it began). Its upstream connection, if
        /// it still has one, is closed.
        let request: Request?
        /// The connection carries another request: the answer's head says so.
        let keepAlive: Bool
        /// The guard has not yet heard that the request is being served: tell it first.
        let tellGuard: Bool
    }

    /// Whether the connection may carry another request after this answer: not when either side
    /// asked to close, when the answer's body ends with the close, when the request's body was not
    /// read to its end (what follows would be read as a request), nor when `mayKeep` says no (the
    /// daemon stops, or a reload took the peer's access away, TENANT-3).
    static func keeps(_ exchange: Exchange, _ framing: ProxyRules.ClientFraming, _ mayKeep: () -> Bool) -> Bool {
        exchange.keepAlive && exchange.body.complete && framing == .asUpstream && mayKeep()
    }

    /// The request is done: the next one, or the connection's end.
    mutating func end(_ exchange: Exchange, keepAlive: Bool) -> Ending {
        state = keepAlive ? .idle : .closed
        return Ending(request: exchange.request, keepAlive: keepAlive, tellGuard: !exchange.serving)
    }

    // MARK: A token and a connection

    /// The token the request waited for is there (or the wait ended): false when `request` is no
    /// longer waiting for one.
    mutating func tokenReady(for request: Request) -> Bool {
        guard case .active(var exchange) = state, exchange.request === request, exchange.step == .waitingForToken else { return false }
        exchange.step = .connecting
        state = .active(exchange)
        return true
    }

    /// Whether `request` is the one in progress, waiting for its upstream connection.
    func isConnecting(_ request: Request) -> Bool {
        guard case .active(let exchange) = state else { return false }
        return exchange.request === request && exchange.step == .connecting
    }

    /// What the driver sends on a connection it just attached.
    struct Attach: Equatable {
        /// How the request's body is framed upstream.
        let framing: ProxyRules.Framing
        /// The body kept so far goes after the head.
        let sendKept: Bool
        /// The kept bytes are sent for good (a streamed body is never replayed): drop them.
        let dropKept: Bool
        /// The request is complete: a chunked body ends with its last chunk.
        let endChunked: Bool
    }

    /// An upstream connection is there for `request` (new, or `reused` from the pool). Nil when
    /// that request is no longer connecting: the connection goes back.
    mutating func upstreamAttached(for request: Request, reused: Bool) -> Attach? {
        guard case .active(var exchange) = state, exchange.request === request, exchange.step == .connecting else { return nil }
        let framing = exchange.upstreamFraming
        let attach: Attach
        switch exchange.body {
        case .kept(let bytes, _):
            attach = Attach(framing: framing, sendKept: bytes > 0, dropKept: false, endChunked: false)
        case .streaming(let waiting, let complete):
            attach = Attach(framing: framing, sendKept: waiting > 0, dropKept: true, endChunked: complete && framing == .chunked)
            exchange.body = .streaming(waiting: 0, complete: complete)
        }
        exchange.step = .sent(Upstream(reused: reused, requestComplete: exchange.body.complete))
        state = .active(exchange)
        return attach
    }

    // MARK: The answer

    enum AnswerHead: Equatable {
        /// To the client, with the framing given, saying whether the connection is kept.
        case pass(keepAlive: Bool)
        /// Kept by the driver: a challenge's answer, while the replay is decided.
        case hold
    }

    /// The answer's head. `challenge`: it is one (ProxyRules.isChallenge). (Tell the guard on a pass.)
    mutating func answerHeadArrived(challenge: Bool, clientFraming: ProxyRules.ClientFraming, mayKeep: () -> Bool) -> AnswerHead {
        update("an answer's head") { exchange in
            guard case .sent(let upstream) = exchange.step else { preconditionFailure("an answer's head in \(exchange.step)") }
            if challenge, exchange.replayable, !exchange.replayed {
                exchange.step = .holding(upstream, held: 0, framing: clientFraming)
                return .hold
            }
            let keeps = Self.keeps(exchange, clientFraming, mayKeep)
            exchange.step = .answering(upstream, keeps: keeps)
            return .pass(keepAlive: keeps)
        }
    }

    /// Whether answer bytes that arrive now would be held back with a challenge (the budget is asked first).
    var holdsChallenge: Bool {
        if case .active(let exchange) = state, case .holding = exchange.step { return true }
        return false
    }

    enum AnswerBody: Equatable {
        /// To the client.
        case pass
        /// Kept by the driver with the challenge's head.
        case hold
        /// The challenge's answer outgrew what is held: its head (saying whether the connection is
        /// kept) and body go to the client now.
        case passHeld(keepAlive: Bool)
    }

    /// `mayHold`: whether the memory budget lets the driver keep these bytes of a challenge;
    /// past it the challenge is passed on, as one too large to hold is (TENANT-12).
    mutating func answerBodyArrived(_ count: Int, mayHold: Bool = true, mayKeep: () -> Bool) -> AnswerBody {
        update("an answer's body") { exchange in
            switch exchange.step {
            case .answering:
                return .pass
            case .holding(let upstream, let held, let framing):
                guard held + count > Self.maximumHeldChallenge || !mayHold else {
                    exchange.step = .holding(upstream, held: held + count, framing: framing)
                    return .hold
                }
                let keeps = Self.keeps(exchange, framing, mayKeep)
                exchange.step = .answering(upstream, keeps: keeps)
                return .passHeld(keepAlive: keeps)
            default:
                preconditionFailure("an answer's body in \(exchange.step)")
            }
        }
    }

    enum AnswerEnd {
        /// The client's answer is complete. `pool`: its upstream connection carried a whole
        /// request and answer, and goes back to its pool; otherwise it is closed.
        case finish(Ending, pool: Bool)
        /// A challenge's whole answer is held, its connection let go as `pool` says: decide on a
        /// replay (`challenged`).
        case challenged(pool: Bool)
    }

    mutating func answerEnded() -> AnswerEnd {
        guard case .active(var exchange) = state else { preconditionFailure("an answer's end without a request") }
        switch exchange.step {
        case .answering(let upstream, let keeps):
            return .finish(end(exchange, keepAlive: keeps), pool: upstream.requestComplete)
        case .holding(let upstream, _, let framing):
            exchange.step = .challenged(framing: framing)
            state = .active(exchange)
            return .challenged(pool: upstream.requestComplete)
        default:
            preconditionFailure("an answer's end in \(exchange.step)")
        }
    }

    // MARK: Challenges

    enum Challenge {
        /// The held answer goes to the client as the upstream sent it; the request is done.
        case passOn(Ending)
        /// The request goes once more, with `token`, on a new connection (`connecting`).
        case replay(token: String)
        /// Refresh the token first (`refreshed`).
        case refresh
    }

    /// A challenge's answer is held: passed on, replayed with a newer token, or a refresh first.
    mutating func challenged(sentToken: String?, currentToken: String?, mayKeep: () -> Bool) -> Challenge {
        guard case .active(var exchange) = state, case .challenged(let framing) = exchange.step else {
            preconditionFailure("a challenge decided with none held")
        }
        switch ProxyRules.afterChallenge(
            replayable: exchange.replayable, replayed: exchange.replayed, sentToken: sentToken, currentToken: currentToken)
        {
        case .passOn:
            return .passOn(end(exchange, keepAlive: Self.keeps(exchange, framing, mayKeep)))
        case .replay(let token):
            exchange.replay()
            state = .active(exchange)
            return .replay(token: token)
        case .refresh:
            exchange.step = .refreshing(framing: framing)
            state = .active(exchange)
            return .refresh
        }
    }

    /// The refresh a challenge asked for ended with `token`. Nil when `request` is no longer
    /// waiting for it (the connection closed).
    mutating func refreshed(_ token: String?, sentToken: String?, for request: Request, mayKeep: () -> Bool) -> Challenge? {
        guard case .active(var exchange) = state, exchange.request === request, case .refreshing(let framing) = exchange.step else {
            return nil
        }
        guard case .replay(let token) = ProxyRules.afterRefresh(token, sentToken: sentToken) else {
            return .passOn(end(exchange, keepAlive: Self.keeps(exchange, framing, mayKeep)))
        }
        exchange.replay()
        state = .active(exchange)
        return .replay(token: token)
    }
}

extension ProxyConnectionMachine.Exchange {
    /// The request goes once more, on a new connection, with the kept body.
    fileprivate mutating func replay() {
        replayed = true
        step = .connecting
    }
}
