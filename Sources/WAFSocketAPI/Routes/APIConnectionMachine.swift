import NIOCore
import NIOHTTP1
import WAFDaemonTransport

/// One connection of the socket API as a value, like the provider's machine: an event in, what to
/// do out. Its states carry their data: the request being read exists only while it is read, the
/// answer awaited only while one is, the stream's id only while it streams. `APIHandler` performs
/// what it returns and keeps only the handles a state needs (timers, the provider's wait).
///
/// NIO's decoder gives a head, its body, then its end, and its pipelining handler holds the next
/// request until the answer's end is written; so a body without a head, or a head while a request
/// is read, routed or awaited, cannot happen, and is a `preconditionFailure`. Once the connection
/// began to close (an answer with `Connection: close`, a finished stream), a request already
/// pipelined behind may still arrive: it is dropped.
struct APIConnectionMachine {
    /// The request whose head came; its body arriving.
    struct Reading {
        let number: UInt64
        let head: HTTPRequestHead
        var body: ByteBuffer
        var bodyTooLarge: Bool
    }

    /// A complete request, while its endpoint decides.
    struct Routing {
        let number: UInt64
        let head: HTTPRequestHead
        let body: ByteBuffer
    }

    /// A request whose answer comes later (from the provider, a timer, or the stop).
    struct Awaiting {
        let number: UInt64
        let head: HTTPRequestHead
        let endpoint: String
        /// What it gets if the daemon's stop comes first: what there is then.
        let atStop: @Sendable () -> HTTPReply
    }

    enum State {
        /// Between requests; `last` numbers the requests answered so far.
        case idle(last: UInt64)
        case reading(Reading)
        case routing(Routing)
        case awaiting(Awaiting)
        /// `/v1/events`: answered with a stream that ends with the connection.
        case streaming(id: UInt64)
        /// The last answer is out and the connection closes: nothing more is read.
        case closing
        case closed
    }

    /// What the handler does next.
    enum Action {
        case none
        /// Tell the connection's guard a request began, and time its body.
        case requestStarted
        /// The request is complete: stop timing its body and route it (a body past the limit is
        /// answered 413 once the peer is known to be let in).
        case route(HTTPRequestHead, bodyTooLarge: Bool)
        /// Write this answer to request `number`; close after it unless `keepAlive`.
        case write(HTTPRequestHead, HTTPReply, endpoint: String, keepAlive: Bool, number: UInt64)
        /// The stop came while an answer is awaited: answer request `number` with `atStop()` by the stop's deadline.
        case answerAtStop(number: UInt64, atStop: @Sendable () -> HTTPReply)
        /// End the stream `id`, then close.
        case finishStream(id: UInt64)
        /// The connection is gone: let go of its timers, its wait and its stream, if any.
        case release(stream: UInt64?)
    }

    private(set) var state = State.idle(last: 0)

    // MARK: Reading

    mutating func headArrived(_ head: HTTPRequestHead) -> Action {
        switch state {
        case .idle(let last):
            state = .reading(Reading(number: last &+ 1, head: head, body: ByteBuffer(), bodyTooLarge: false))
            return .requestStarted
        case .closing, .closed:
            return .none
        case .reading, .routing, .awaiting, .streaming:
            preconditionFailure("a request head while another request is \(state): NIO's pipelining handler holds it back")
        }
    }

    /// Keeps at most `limit` bytes of the body; past that the request is answered 413 at its end.
    mutating func bodyArrived(_ chunk: ByteBuffer, limit: Int) {
        switch state {
        case .reading(var reading):
            if reading.body.readableBytes + chunk.readableBytes > limit {
                reading.bodyTooLarge = true
            } else {
                var chunk = chunk
                reading.body.writeBuffer(&chunk)
            }
            state = .reading(reading)
        case .closing, .closed:
            return
        case .idle, .routing, .awaiting, .streaming:
            preconditionFailure("a body part without its head (\(state)): NIO's decoder gives a head first")
        }
    }

    /// The end of the request: route it.
    mutating func endArrived() -> Action {
        switch state {
        case .reading(let reading):
            state = .routing(Routing(number: reading.number, head: reading.head, body: reading.body))
            return .route(reading.head, bodyTooLarge: reading.bodyTooLarge)
        case .closing, .closed:
            return .none
        case .idle, .routing, .awaiting, .streaming:
            preconditionFailure("a request's end without its head (\(state)): NIO's decoder gives a head first")
        }
    }

    /// The body did not come within the request timeout: 408, and the connection closes.
    mutating func bodyTimedOut() -> Action {
        guard case .reading(let reading) = state else { return .none }
        state = .routing(Routing(number: reading.number, head: reading.head, body: reading.body))
        return answered(DaemonError.timedOut.reply, endpoint: "-", close: true, shuttingDown: false)
    }

    // MARK: Answering

    /// The request being routed, with its body (`PUT /v1/lifecycle` reads it).
    var routed: Routing? {
        if case .routing(let routing) = state { routing } else { nil }
    }

    /// The endpoint answers the request being routed now, or an awaited answer arrives: it is
    /// written, kept alive when the request allows it, nothing closes it and no stop has begun.
    mutating func answered(_ reply: HTTPReply, endpoint: String, close: Bool, shuttingDown: Bool) -> Action {
        let head: HTTPRequestHead, number: UInt64
        switch state {
        case .routing(let routing): (head, number) = (routing.head, routing.number)
        case .awaiting(let awaiting): (head, number) = (awaiting.head, awaiting.number)
        case .closing, .closed: return .none
        case .idle, .reading, .streaming:
            preconditionFailure("an answer with no request to answer (\(state))")
        }
        let keepAlive = head.isKeepAlive && !close && !shuttingDown
        state = keepAlive ? .idle(last: number) : .closing
        return .write(head, reply, endpoint: endpoint, keepAlive: keepAlive, number: number)
    }

    /// The endpoint answers later; returns the request's number, which the answer must carry.
    mutating func deferred(endpoint: String, atStop: @escaping @Sendable () -> HTTPReply) -> UInt64 {
        guard case .routing(let routing) = state else { preconditionFailure("an answer deferred with no request being routed (\(state))") }
        state = .awaiting(Awaiting(number: routing.number, head: routing.head, endpoint: endpoint, atStop: atStop))
        return routing.number
    }

    /// An awaited answer (from the provider, a timeout, or the stop's deadline): written if it is
    /// for the request still awaiting one; an answer to an older request, or one that comes second, is dropped.
    mutating func arrived(_ reply: HTTPReply, for number: UInt64, shuttingDown: Bool) -> Action {
        guard case .awaiting(let awaiting) = state, awaiting.number == number else { return .none }
        return answered(reply, endpoint: awaiting.endpoint, close: false, shuttingDown: shuttingDown)
    }

    /// Whether request `number` is still the last one: no request after it has begun (its
    /// answer's end may let the pipelining handler pass the next one on at once).
    func isLast(_ number: UInt64) -> Bool {
        switch state {
        case .idle(let last): last == number
        case .closing, .closed: true
        case .reading(let reading): reading.number == number
        case .routing(let routing): routing.number == number
        case .awaiting(let awaiting): awaiting.number == number
        case .streaming: false
        }
    }

    // MARK: Streams

    mutating func streamStarted(id: UInt64) {
        guard case .routing = state else { preconditionFailure("a stream with no request being routed (\(state))") }
        state = .streaming(id: id)
    }

    var isStreaming: Bool {
        if case .streaming = state { true } else { false }
    }

    /// The broadcaster ends the stream (the peer lost its access), or the stop does.
    mutating func streamFinished() -> Action {
        guard case .streaming(let id) = state else { return .none }
        state = .closing
        return .finishStream(id: id)
    }

    // MARK: Stop and close

    /// The daemon stops: a stream ends now; an awaited answer comes by the stop's deadline.
    mutating func stopBegan() -> Action {
        switch state {
        case .streaming: return streamFinished()
        case .awaiting(let awaiting):
            return .answerAtStop(number: awaiting.number, atStop: awaiting.atStop)
        case .idle, .reading, .routing, .closing, .closed:
            return .none
        }
    }

    mutating func closed() -> Action {
        let stream: UInt64? = if case .streaming(let id) = state { id } else { nil }
        state = .closed
        return .release(stream: stream)
    }
}
