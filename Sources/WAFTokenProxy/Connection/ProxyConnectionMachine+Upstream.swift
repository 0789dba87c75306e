/// The upstream's side of a proxy connection: sending the request, its answer, a challenge and its
/// replay, failures.
extension ProxyConnectionMachine {
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

    /// An upstream connection is there for the request (new, or `reused` from the pool).
    mutating func upstreamAttached(reused: Bool) -> Attach? {
        update { exchange in
            let framing = exchange.upstreamFraming
            let attach = Attach(
                framing: framing, sendKept: exchange.kept > 0, dropKept: exchange.streaming,
                endChunked: exchange.requestComplete && framing == .chunked)
            exchange.hasUpstream = true
            exchange.upstreamReused = reused
            exchange.phase = exchange.requestComplete || !exchange.streaming ? .awaitingAnswer : .receiving
            if exchange.streaming { exchange.kept = 0 }
            exchange.upstreamHeadSent = true
            exchange.upstreamRequestComplete = exchange.requestComplete
            return attach
        }
    }

    enum AnswerPart: Equatable {
        /// To the client (the head with the framing `exchange.clientFraming` gives).
        case pass
        /// Kept by the driver: a challenge's answer, while the replay is decided.
        case hold
        /// The challenge's answer outgrew what is kept: its head and body go to the client now.
        case passHeld
        /// Out of order (an answer before the request was sent): the upstream failed.
        case fail
    }

    /// The answer's head. `challenge`: it is one (ProxyRules.isChallenge).
    mutating func answerHeadArrived(challenge: Bool, clientFraming: ProxyRules.ClientFraming) -> AnswerPart {
        update { exchange in
            guard exchange.phase == .awaitingAnswer || exchange.phase == .receiving else { return .fail }
            exchange.clientFraming = clientFraming
            if challenge, exchange.replayable, !exchange.replayed {
                exchange.phase = .holdingChallenge
                exchange.held = 0
                return .hold
            }
            exchange.phase = .answering
            return .pass
        } ?? .fail
    }

    /// `mayHold`: whether the memory budget lets the driver keep these bytes of a challenge;
    /// past it the challenge is passed on, as one too large to hold is (TENANT-12).
    mutating func answerBodyArrived(_ count: Int, mayHold: Bool = true) -> AnswerPart {
        update { exchange in
            switch exchange.phase {
            case .answering:
                return .pass
            case .holdingChallenge:
                exchange.held += count
                guard exchange.held > Self.maximumHeldChallenge || !mayHold else { return .hold }
                exchange.phase = .answering
                return .passHeld
            default:
                return .fail
            }
        } ?? .fail
    }

    enum AnswerEnd: Equatable {
        /// The client's answer is complete.
        case finish
        /// A challenge's whole answer is held: decide on a replay (`challenged`).
        case challenged
        case fail
    }

    mutating func answerEnded() -> AnswerEnd {
        switch exchange?.phase {
        case .answering: .finish
        case .holdingChallenge: .challenged
        default: .fail
        }
    }

    /// The request no longer has its upstream connection. True when that connection carried a
    /// whole request and answer, and so may go back to its pool; false: close it.
    mutating func upstreamDetached() -> Bool {
        update { exchange in
            defer { exchange.hasUpstream = false }
            return exchange.hasUpstream && exchange.upstreamRequestComplete
        } ?? false
    }

    // MARK: Challenges

    /// A challenge's answer is held: passed on, replayed with a newer token, or a refresh first.
    mutating func challenged(sentToken: String?, currentToken: String?) -> ProxyRules.ChallengeAnswer {
        update { exchange in
            let answer = ProxyRules.afterChallenge(
                replayable: exchange.replayable, replayed: exchange.replayed, sentToken: sentToken, currentToken: currentToken)
            switch answer {
            case .passOn: exchange.phase = .answering
            case .replay: exchange.replay()
            case .refresh: exchange.phase = .refreshing
            }
            return answer
        } ?? .passOn
    }

    /// The refresh a challenge asked for ended with `token`. Nil when the request is no longer
    /// waiting for it (the connection closed, or the wait was given up).
    mutating func refreshed(_ token: String?, sentToken: String?) -> ProxyRules.ChallengeAnswer? {
        update { exchange in
            guard exchange.phase == .refreshing else { return nil }
            let answer = ProxyRules.afterRefresh(token, sentToken: sentToken)
            if case .replay = answer { exchange.replay() } else { exchange.phase = .answering }
            return answer
        } ?? nil
    }

    // MARK: Failures

    enum Failure: Equatable {
        /// Part of the answer went out: the client can only learn of the failure by the close.
        case closeClient
        /// An error answers the request; `closeAfter`: the rest of a streamed body is not read, so
        /// the connection cannot carry another request.
        case answer(closeAfter: Bool)
        /// No request is in progress.
        case none
    }

    /// The upstream cannot answer (unreachable, closed, timed out).
    mutating func upstreamFailed() -> Failure {
        let failure: Failure? = update { exchange in
            exchange.hasUpstream = false
            return exchange.phase == .answering ? .closeClient : .answer(closeAfter: !exchange.requestComplete)
        }
        // The rest of the body is not read: like a refused request, answered and then closed.
        if failure == .answer(closeAfter: true) { refuse() }
        return failure ?? .none
    }

    enum Closed: Equatable {
        case closeClient
        /// A kept-alive connection the upstream closed before this request got there: once more
        /// on a new one, the request being one that can be sent again.
        case retry
        case fail
        /// The request had no upstream connection (it was detached already).
        case none
    }

    /// The upstream connection closed before its answer ended.
    mutating func upstreamClosed() -> Closed {
        update { exchange in
            guard exchange.hasUpstream else { return .none }
            if exchange.phase == .answering { return .closeClient }
            guard exchange.phase == .awaitingAnswer, exchange.upstreamReused, !exchange.retriedClosedConnection, exchange.replayable else {
                return .fail
            }
            exchange.retriedClosedConnection = true
            exchange.hasUpstream = false
            exchange.upstreamHeadSent = false
            return .retry
        } ?? .none
    }
}

extension ProxyConnectionMachine.Exchange {
    /// How the body is framed upstream: a kept body by its length, a streamed one as the client
    /// framed it.
    var upstreamFraming: ProxyRules.Framing {
        if streaming {
            if case .length(let length) = framing { return .length(length) }
            return .chunked
        }
        return kept > 0 ? .length(kept) : .none
    }

    /// The request goes once more, on a new connection, with the kept body.
    fileprivate mutating func replay() {
        replayed = true
        upstreamHeadSent = false
        upstreamRequestComplete = false
        phase = .connecting
    }
}
