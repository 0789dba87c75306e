import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The socket API behind NIOHTTP1 (docs/socket-api.md): one request at a time (the
/// pipeline handler before it orders pipelined requests), answered at once or, for the calls that
/// wait on the provider, later on the connection's event loop.
final class APIHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let maximumBodyBytes = 8 * 1024
    /// `?wait=` longer than an hour is almost certainly a mistake.
    static let maximumWait = 3600.0
    static let defaultRefreshWait = 30.0
    /// A request that waits is answered this long before the stop's deadline, so that the answer
    /// is out before the connection is closed.
    static let stopMargin = TimeAmount.milliseconds(250)
    static let stopping = DaemonError.stopping.reply

    let api: APIContext
    let connection: ConnectionState
    /// After answering a request that asked for an upgrade: NIO's decoder stopped there.
    private let restartDecoder: () -> Void
    /// Where the connection is: reading, routing, awaiting an answer, streaming (`APIConnectionMachine`).
    private var machine = APIConnectionMachine()
    /// The handles of the state the machine is in, which only the loop can hold: the body's
    /// timer while a request is read; the answer's timer and the provider's wait while one is
    /// awaited. The wait is withdrawn once the request is answered otherwise (its timeout, the
    /// stop) or the client leaves, so that the provider forgets the callback at once instead of
    /// holding it until RET-3 while fetches fail (TENANT-12).
    private var bodyTimer: Scheduled<Void>?
    private var answerTimer: Scheduled<Void>?
    /// When `answerTimer` fires.
    private var answerDue: NIODeadline?
    var pendingWait: WAFTokenWait?
    /// The daemon's stop, once it began: a request read before it that then waits or streams
    /// gets its stop-time answer or end too, not only those waiting when it came.
    private var stop: ServerShutdownEvent?

    init(api: APIContext, connection: ConnectionState, restartDecoder: @escaping () -> Void) {
        self.api = api
        self.connection = connection
        self.restartDecoder = restartDecoder
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): perform(machine.headArrived(head), context)
        case .body(let chunk): machine.bodyArrived(chunk, limit: Self.maximumBodyBytes)
        case .end: perform(machine.endArrived(), context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.closed(), context)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let stop = event as? ServerShutdownEvent {
            self.stop = stop
            perform(machine.stopBegan(), context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Does what the machine decided.
    private func perform(_ action: APIConnectionMachine.Action, _ context: ChannelHandlerContext) {
        switch action {
        case .none:
            return
        case .requestStarted:
            context.triggerUserOutboundEvent(ConnectionEvent.requestStarted, promise: nil)
            // A client that sends a head and then drips its body is cut off like one that drips its head.
            bodyTimer = context.eventLoop.assumeIsolated().scheduleTask(in: api.settings.requestTimeout) {
                self.perform(self.machine.bodyTimedOut(), context)
            }
        case .route(let head, let bodyTooLarge):
            bodyTimer?.cancel()
            bodyTimer = nil
            route(context, head, bodyTooLarge: bodyTooLarge)
        case .write(let head, let reply, let endpoint, let keepAlive, let number):
            write(context, head, reply, endpoint: endpoint, keepAlive: keepAlive, number: number)
        case .answerAtStop(let number, let atStop):
            // It goes on waiting, and gets what there is when the stop's deadline comes, unless
            // its own timeout comes first.
            let due = max(context.eventLoop.now, (stop?.deadline ?? context.eventLoop.now) - Self.stopMargin)
            if let answerDue, answerDue <= due { return }
            answerDue = due
            answerTimer?.cancel()
            answerTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) {
                self.answerIfCurrent(number, context, atStop())
            }
        case .finishStream(let id):
            api.events.unsubscribe(id)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: false), promise: nil)
        case .release(let stream):
            releaseAwaiting()
            bodyTimer?.cancel()
            bodyTimer = nil
            if let stream { api.events.unsubscribe(stream) }
        }
    }

    private func releaseAwaiting() {
        answerTimer?.cancel()
        answerTimer = nil
        answerDue = nil
        pendingWait?.cancel()
        pendingWait = nil
    }

    // MARK: Routing

    private func route(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, bodyTooLarge: Bool) {
        func answer(_ response: HTTPReply, _ endpoint: String) { respond(context, response, endpoint: endpoint) }
        guard head.version.major == 1 else { return answer(DaemonError.unsupportedVersion.reply, "-") }
        guard Self.headBytes(head) <= HTTPLimits.maximumHeadBytes else { return answer(DaemonError.headTooLarge.reply, "-") }
        guard api.allows(connection) else {
            // Refused, and closed: a refused peer keeps nothing open here (TENANT-6).
            return respond(context, DaemonError.socketForbidden.reply, endpoint: "-", close: true)
        }
        if bodyTooLarge {
            return answer(DaemonError.bodyTooLarge(limit: Self.maximumBodyBytes).reply, "-")
        }
        guard let target = RequestTarget(head.uri) else {
            return answer(DaemonError.badTarget.reply, "-")
        }
        let query = target.query
        let routes: [String: ([HTTPMethod], () -> Void)] = [
            "/v1/token": ([.GET, .HEAD], { self.token(context, head, query) }),
            "/v1/auth": ([.GET, .HEAD], { self.auth(context, head, query) }),
            "/v1/refresh": ([.POST], { self.refresh(context, head, query) }),
            "/v1/cookie": ([.GET, .HEAD], { self.cookie(context, head, query) }),
            "/v1/events": ([.GET], { self.events(context, head, query) }),
            "/v1/status": ([.GET, .HEAD], { self.status(context, head, query) }),
            "/v1/providers": ([.GET, .HEAD], { self.providersList(context, head) }),
            "/v1/lifecycle": ([.PUT], { self.lifecycle(context, head) }),
            "/healthz": ([.GET, .HEAD], { self.health(context, head) }),
            "/readyz": ([.GET, .HEAD], { self.ready(context, head, query) }),
            "/metrics": ([.GET, .HEAD], { self.metrics(context, head) }),
        ]
        guard api.role.serves(target.path), let (methods, handle) = routes[target.path] else {
            return answer(DaemonError.noSuchEndpoint(path: target.path).reply, "-")
        }
        guard methods.contains(head.method) else {
            let allow = methods.map(\.rawValue).joined(separator: ", ")
            return answer(DaemonError.methodNotAllowed(path: target.path, allow: allow).reply, target.path)
        }
        handle()
    }

    /// The head's size on the wire, near enough: request line, each field with ": " and CRLF, the
    /// blank line. The decoder's own limit counts only names and values.
    static func headBytes(_ head: HTTPRequestHead) -> Int {
        head.headers.reduce(head.method.rawValue.utf8.count + head.uri.utf8.count + 14) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }

    /// NIO's decoder stops after a request that asks for an upgrade (`Connection: upgrade` with
    /// `Upgrade`, or CONNECT): we take none, so it is restarted once the answer is out.
    static func asksForUpgrade(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        let connection = head.headers[canonicalForm: "connection"].map { $0.lowercased() }
        return !head.headers["upgrade"].isEmpty && connection.contains("upgrade")
    }

    // MARK: Answering

    /// Answers the request being routed: now, or, from `answerLater`'s closure, later. Closed after it with `close`, or when the request or a stop asks for it.
    func respond(_ context: ChannelHandlerContext, _ response: HTTPReply, endpoint: String, close: Bool = false) {
        perform(machine.answered(response, endpoint: endpoint, close: close, shuttingDown: api.shuttingDown.load(ordering: .relaxed)), context)
    }

    /// Writes a complete answer, then tells the connection's guard the request is done.
    private func write(
        _ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ response: HTTPReply, endpoint: String, keepAlive: Bool, number: UInt64
    ) {
        releaseAwaiting()
        guard context.channel.isActive else { return }
        let version = HTTPVersion(major: 1, minor: head.version.minor == 0 ? 0 : 1)
        context.write(wrapOutboundOut(.head(response.head(version: version, keepAlive: keepAlive))), promise: nil)
        if head.method != .HEAD, !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
        api.metrics.countRequests(endpoint: endpoint, status: response.status.code)
        api.requestsServed.add(1, ordering: .relaxed)
        // The end may have let NIO's pipelining handler pass the next request on at once: the
        // guard then heard it begin, and must not hear that this answer left the connection idle.
        if machine.isLast(number) {
            context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: false), promise: nil)
        }
        if keepAlive, Self.asksForUpgrade(head) { restartDecoder() }
    }

    /// A way to answer the current request later, from any thread; after `timeout`, `onTimeout`
    /// answers instead, and whichever comes second is dropped.
    func answerLater(
        _ context: ChannelHandlerContext, endpoint: String,
        timeout: TimeAmount? = nil, onTimeout: HTTPReply? = nil, atStop: @escaping @Sendable () -> HTTPReply = { APIHandler.stopping }
    ) -> @Sendable (HTTPReply) -> Void {
        let number = machine.deferred(endpoint: endpoint, atStop: atStop)
        // Weakly: the provider may hold the answer for a while (a stalled token service), and a
        // client gone meanwhile must not be kept alive by it.
        let bound = NIOLoopBound(AnswerTarget(handler: self, context: context), eventLoop: context.eventLoop)
        if let timeout, let onTimeout {
            answerDue = context.eventLoop.now + timeout
            answerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
                self.answerIfCurrent(number, context, onTimeout)
            }
        }
        if stop != nil { perform(.answerAtStop(number: number, atStop: atStop), context) }
        return { [gate = api.loopGate] response in
            gate.execute(on: bound.eventLoop) {
                guard let handler = bound.value.handler, let context = bound.value.context else { return }
                handler.answerIfCurrent(number, context, response)
            }
        }
    }

    /// Where a later answer goes, if the connection is still there.
    private final class AnswerTarget {
        weak var handler: APIHandler?
        weak var context: ChannelHandlerContext?

        init(handler: APIHandler, context: ChannelHandlerContext) {
            self.handler = handler
            self.context = context
        }
    }

    private func answerIfCurrent(_ number: UInt64, _ context: ChannelHandlerContext, _ response: HTTPReply) {
        perform(machine.arrived(response, for: number, shuttingDown: api.shuttingDown.load(ordering: .relaxed)), context)
    }

    /// The body of the request being routed (`PUT /v1/lifecycle` reads it).
    var requestBody: ByteBuffer { machine.routed?.body ?? ByteBuffer() }

    // MARK: Streams

    /// `/v1/events` answered with a stream: the broadcaster's subscription `id`. Once the stop
    /// began, it ends at once.
    func streamStarted(id: UInt64, _ context: ChannelHandlerContext) {
        machine.streamStarted(id: id)
        if stop != nil { finishStream(context) }
    }

    var isStreaming: Bool { machine.isStreaming }

    /// The stream ends (the peer lost its access): its end is written and the connection closes.
    func finishStream(_ context: ChannelHandlerContext) { perform(machine.streamFinished(), context) }

}

extension APIHandler {
    /// The provider of this request, or nil once the request has been answered with why not.
    func provider(for query: [String: String], _ context: ChannelHandlerContext, endpoint: String) -> ProviderEntry? {
        switch api.providers.select(query, peer: connection.peer, operatorView: api.role == .probes) {
        case .provider(let entry): return entry
        case .refused(let refusal):
            respond(context, HTTPReply(refusal), endpoint: endpoint)
            return nil
        }
    }
}
