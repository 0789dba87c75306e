import NIOCore
import WAFHTTPWire

/// One proxied request, from its head to its answer's end. A class: the handlers change it in
/// place many times per request, and copying a value this size in and out cost a tenth of the
/// proxy's time in reference counting.
final class ProxyExchange {
    enum Phase {
        /// The request's body is still arriving (kept, or streamed once the upstream is there).
        case receiving
        /// Waiting for a first token (`proxy.tokenWaitSec`).
        case waitingForToken
        case connecting
        /// Sent (or sending); no answer yet.
        case awaitingAnswer
        /// A challenge arrived; its answer (head, and body as the client would get it) is kept
        /// until the replay is decided.
        case holdingChallenge(Answer)
        /// Waiting for the new token a challenge asked for.
        case refreshing(Answer)
        /// The answer is going to the client.
        case answering
    }

    /// An upstream answer kept back.
    struct Answer {
        let head: HTTPHead
        let framing: HTTPFraming
        var body: ByteBuffer
    }

    let route: ProxyContext.Route
    let head: HTTPHead
    /// Where the upstream gets it: the client's path normalised, below the base path.
    let target: String
    /// How the client frames the request's body.
    let requestFraming: HTTPFraming
    let keepAlive: Bool
    var phase = Phase.receiving
    /// The body so far while it may still be replayed; what waits for the upstream when streamed.
    var body: ByteBuffer
    /// How much of a length-framed body is still to come.
    var bodyLeft = 0
    /// Where a chunked body is.
    var chunks = ChunkedScanner()
    /// Whether the body goes as it arrives, past the replay buffer: then it is never replayed.
    var streaming: Bool
    /// The client's request is complete (its body read to the end).
    var requestComplete = false
    /// The upstream got the request's head (on the current connection).
    var upstreamHeadSent = false
    /// The upstream got the whole request: only then can its connection be reused.
    var upstreamRequestComplete = false
    var upstream: UpstreamConnection?
    var sentToken: String?
    var replayed = false
    /// A pooled connection that the upstream had closed is tried once more on a new one.
    var retriedClosedConnection = false
    var sentAt = NIODeadline.now()
    /// How the answer's body goes to the client (set with the answer's head).
    var clientFraming = ProxyRules.ClientFraming.asUpstream

    init(
        route: ProxyContext.Route, head: HTTPHead, target: String, framing: HTTPFraming, plan: ProxyRules.BodyPlan, allocator: ByteBufferAllocator
    ) {
        self.route = route
        self.head = head
        self.target = target
        requestFraming = framing
        keepAlive = head.keepAlive
        streaming = plan == .stream
        body = allocator.buffer(capacity: 0)
        if case .length(let length) = framing { bodyLeft = length }
        requestComplete = framing == .none
    }

    var replayable: Bool { !streaming }

    /// The client's answer has begun: an error can no longer be answered, only the connection closed.
    var answering: Bool {
        if case .answering = phase { return true }
        return false
    }

    /// How the body is framed upstream: a kept body by its length, a streamed one as the client
    /// framed it.
    var framing: ProxyRules.Framing {
        if streaming {
            if case .length(let length) = requestFraming { return .length(length) }
            return .chunked
        }
        return body.readableBytes > 0 ? .length(body.readableBytes) : .none
    }
}
