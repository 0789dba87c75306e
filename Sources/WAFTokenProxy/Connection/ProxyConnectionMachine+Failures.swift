/// What ends a request early: a refusal, a broken body, the upstream's failure, a close.
extension ProxyConnectionMachine {
    enum Failure {
        /// Part of the answer (or of the request, upstream) went out: the client can only learn of
        /// the failure by the close. The connection is closed.
        case closeClient(Request)
        /// An error of the proxy's own answers the request.
        case answer(Ending)
    }

    /// A request head the proxy refuses to read on: its error is answered, then the connection closes.
    mutating func refuse() -> Ending {
        guard case .idle = state else { preconditionFailure("a head refused while a request is in progress") }
        state = .closed
        return Ending(request: nil, keepAlive: false, tellGuard: true)
    }

    /// The request's body cannot be read on (malformed chunks): an error answers it, then the
    /// connection closes; once part of it went upstream, it can only be closed.
    mutating func bodyBroke() -> Failure {
        guard case .active(let exchange) = state, !exchange.body.complete else { preconditionFailure("a broken body with none arriving") }
        state = .closed
        if exchange.upstream != nil { return .closeClient(exchange.request) }
        return .answer(Ending(request: exchange.request, keepAlive: false, tellGuard: !exchange.serving))
    }

    /// The upstream cannot answer (unreachable, closed, timed out): an error answer while nothing
    /// of an answer went out (the connection goes on only if the request's body was read to its
    /// end, and `mayKeep`), a close after.
    mutating func upstreamFailed(mayKeep: () -> Bool) -> Failure {
        guard case .active(let exchange) = state else { preconditionFailure("an upstream failure without a request") }
        switch exchange.step {
        case .connecting, .sent, .holding:
            return .answer(end(exchange, keepAlive: exchange.keepAlive && exchange.body.complete && mayKeep()))
        case .answering:
            state = .closed
            return .closeClient(exchange.request)
        case .reading, .waitingForToken, .challenged, .refreshing:
            preconditionFailure("an upstream failure in \(exchange.step), with no upstream asked")
        }
    }

    /// What follows the close of the request's upstream connection before its answer ended.
    enum Closed {
        case closeClient(Request)
        /// A kept-alive connection the upstream closed before this request got there: once more
        /// on a new one (`connecting`), the request being one that can be sent again.
        case retry
        /// The upstream failed (`upstreamFailed`).
        case fail
    }

    mutating func upstreamClosed() -> Closed {
        guard case .active(var exchange) = state else { preconditionFailure("an upstream close without a request") }
        switch exchange.step {
        case .sent(let upstream):
            guard upstream.reused, !exchange.retriedClosedConnection, exchange.replayable else { return .fail }
            exchange.retriedClosedConnection = true
            exchange.step = .connecting
            state = .active(exchange)
            return .retry
        case .holding:
            return .fail
        case .answering:
            state = .closed
            return .closeClient(exchange.request)
        case .reading, .waitingForToken, .connecting, .challenged, .refreshing:
            preconditionFailure("an upstream close in \(exchange.step), with no upstream attached")
        }
    }

    /// The client left, or the connection cannot go on: the request in progress, if any, whose
    /// upstream connection (an answer in the middle cannot be reused) is closed.
    mutating func closed() -> Request? {
        defer { state = .closed }
        return request
    }
}
