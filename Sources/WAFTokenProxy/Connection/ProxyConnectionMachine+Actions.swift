import WAFHTTPWire

/// What the machine's events tell the driver to do.
extension ProxyConnectionMachine {
    /// What reading the client's bytes means now.
    enum Reading {
        /// The next request's head.
        case head
        /// The body of the request in progress.
        case body(Request, HTTPFraming)
        /// Nothing now: the request is complete and its answer pending (bytes that follow wait), or
        /// the connection is closed.
        case nothing
    }

    enum Begin: Equatable {
        /// Read the body first (answering `100 Continue` when asked).
        case readBody(sendContinue: Bool)
        /// Look for a token and an upstream now, and stream the body as it arrives.
        case dispatchAndStream(sendContinue: Bool)
        /// No body: the request is complete. Tell the guard it is being served, and dispatch.
        case serve
    }

    enum BodyPiece: Equatable {
        /// Straight to the upstream connection, framed as the request goes there.
        case forward(ProxyRules.Framing, Connection)
        /// Kept by the driver.
        case keep
        /// Kept, and the body outgrew the replay buffer (or the budget): it streams from now on,
        /// so dispatch now.
        case keepAndDispatch

        static func == (a: BodyPiece, b: BodyPiece) -> Bool {
            switch (a, b) {
            case (.forward(let x, let c), .forward(let y, let d)): x == y && c === d
            case (.keep, .keep), (.keepAndDispatch, .keepAndDispatch): true
            default: false
            }
        }
    }

    enum RequestEnd {
        /// The kept request goes now: look for a token and an upstream.
        case dispatch
        /// The streamed body is all upstream: end it (a chunked one with its last chunk).
        case endUpstreamBody(Connection, chunked: Bool)
        /// The upstream is not there yet: the body ends when it is.
        case wait
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

    enum AnswerHead: Equatable {
        /// To the client, saying whether the connection is kept; `tellGuard`: the request is
        /// being served from now (its request timeout stops).
        case pass(keepAlive: Bool, tellGuard: Bool)
        /// Held by the machine: a challenge's answer, while the replay is decided.
        case hold
    }

    enum AnswerBody {
        /// To the client.
        case pass
        /// Held with the challenge's head.
        case hold
        /// The challenge's answer outgrew what is held: its head (saying whether the connection is
        /// kept) and body go to the client now.
        case passHeld(HeldAnswer, keepAlive: Bool, tellGuard: Bool)
    }

    /// The request's answer is written whole now (an error of the proxy's own, or a held challenge
    /// passed on), or the upstream's ended: the machine has moved on to the next request, or closed.
    struct Ending {
        /// The request that ended (nil: one refused before it began).
        let request: Request?
        /// The connection carries another request: the answer's head says so.
        let keepAlive: Bool
        /// The guard has not yet heard that the request is being served: tell it first.
        let tellGuard: Bool
        /// The upstream connection the request let go: back to its pool when it carried a whole
        /// request and answer (`pool`), closed otherwise.
        let upstream: (connection: Connection, pool: Bool)?
    }

    enum AnswerEnd {
        /// The client's answer is complete.
        case finish(Ending)
        /// A challenge's whole answer is held, its connection let go as `upstream` says: decide
        /// on a replay (`challenged`).
        case challenged(upstream: (connection: Connection, pool: Bool))
    }

    enum Challenge {
        /// The held answer goes to the client as the upstream sent it; the request is done.
        case passOn(Ending, HeldAnswer)
        /// The request goes once more, with `token`, on a new connection (`connecting`).
        case replay(token: String)
        /// Refresh the token first (`refreshed`).
        case refresh
    }

    enum Failure {
        /// Part of the answer (or of the request, upstream) went out: the client can only learn of
        /// the failure by the close. The connection is closed, and so is `upstream`.
        case closeClient(Request, upstream: Connection?)
        /// An error of the proxy's own answers the request.
        case answer(Ending)
    }

    /// What follows the close of the request's upstream connection before its answer ended.
    enum Closed {
        /// The answer was cut short: the client's connection ends too.
        case closeClient(Request, upstream: Connection)
        /// A kept-alive connection the upstream closed on a request that may go again: once more
        /// on a new one (`connecting`); `upstream` is closed.
        case retry(upstream: Connection)
        /// The upstream failed (`upstreamFailed`).
        case fail
    }
}
