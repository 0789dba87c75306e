import NIOCore
import NIOHTTP1

/// One proxied request, from its head to its answer's end.
struct ProxyExchange {
    enum Phase {
        /// The request's body is still arriving (kept, or streamed once the upstream is there).
        case receiving
        /// Waiting for a first token (`proxy.tokenWaitSec`).
        case waitingForToken
        case connecting
        /// Sent (or sending); no answer yet.
        case awaitingAnswer
        /// A challenge arrived; its answer is kept until the replay is decided.
        case holdingChallenge(HTTPResponseHead, ByteBuffer)
        /// Waiting for the new token a challenge asked for.
        case refreshing(HTTPResponseHead, ByteBuffer)
        /// The answer is going to the client.
        case answering
    }

    let route: ProxyContext.Route
    let head: HTTPRequestHead
    let keepAlive: Bool
    var phase = Phase.receiving
    /// The body so far while it may still be replayed; what waits for the upstream when streamed.
    var body: ByteBuffer
    /// Whether the body goes as it arrives, past the replay buffer: then it is never replayed.
    var streaming: Bool
    /// The client's request is complete (its `.end` arrived).
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

    init(route: ProxyContext.Route, head: HTTPRequestHead, plan: ProxyRules.BodyPlan, allocator: ByteBufferAllocator) {
        self.route = route
        self.head = head
        keepAlive = head.isKeepAlive
        streaming = plan == .stream
        body = allocator.buffer(capacity: 0)
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
            return head.headers.first(name: "content-length").flatMap(Int.init).map { .length($0) } ?? .chunked
        }
        return body.readableBytes > 0 ? .length(body.readableBytes) : .none
    }
}
