import NIOCore
import NIOHTTP1
import WAFTokenCore

/// One client connection of the proxy, after the HTTP codec: each request goes to the configured
/// upstream with the token (`ProxyRules` decide what goes and what a challenge leads to), and its
/// answer comes back as it arrives. Reads on each side follow the other side's writability, so a
/// slow client or upstream makes the proxy wait, not buffer.
final class ProxyHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    let proxy: ProxyContext
    private let connection: ConnectionState
    var context: ChannelHandlerContext?
    var exchange: ProxyExchange?
    /// 504 when the upstream sends nothing for `proxy.upstreamTimeoutSec` (connect, answer or body).
    let stall = MovingTimeout()
    private var clientReadPending = false
    /// Set by an error answered before the request's body was read: the connection cannot go on.
    var closeAfterAnswer = false

    init(proxy: ProxyContext, connection: ConnectionState) {
        self.proxy = proxy
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: The client's request

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            context.triggerUserOutboundEvent(ConnectionEvent.requestStarted, promise: nil)
            begin(head, context)
        case .body(var bytes):
            guard var exchange else { return }  // the body of a request already answered
            if exchange.streaming, let upstream = exchange.upstream, exchange.upstreamHeadSent {
                upstream.handler.send(.body(.byteBuffer(bytes)))
                return
            }
            exchange.body.writeBuffer(&bytes)
            let overflow = !exchange.streaming && exchange.body.readableBytes > exchange.route.settings.replayBufferBytes
            if overflow { exchange.streaming = true }
            self.exchange = exchange
            if overflow { dispatch() }
        case .end:
            guard exchange != nil else { return }
            exchange!.requestComplete = true
            if !exchange!.streaming {
                dispatch()
            } else if let upstream = exchange!.upstream, exchange!.upstreamHeadSent {
                upstream.handler.send(.end(nil))
                upstream.handler.flush()
                exchange!.upstreamRequestComplete = true
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        exchange?.upstream?.handler.flush()
        context.fireChannelReadComplete()
    }

    private func begin(_ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        guard connection.allowed else {
            closeAfterAnswer = true
            answerError(.forbidden, "forbidden", "this user may not use the proxy (proxy.allowedUsers, proxy.allowedGroups)")
            return
        }
        if head.method == .CONNECT {
            closeAfterAnswer = true
            answerError(.methodNotAllowed, "methodNotAllowed", "the proxy forwards to its one upstream; CONNECT is not supported")
            return
        }
        let route = proxy.route
        let plan = ProxyRules.bodyPlan(head, replayBufferBytes: route.settings.replayBufferBytes)
        exchange = ProxyExchange(route: route, head: head, plan: plan, allocator: context.channel.allocator)
        // A request the upstream will see as asking for an upgrade it cannot get: answered, then closed.
        if head.headers.contains(name: "upgrade") { closeAfterAnswer = true }
        if plan == .stream { dispatch() }
    }

    // MARK: Sending it upstream

    /// The request is ready to go (complete, or streaming): a token, a connection, then the bytes.
    func dispatch() {
        guard let context, var exchange else { return }
        exchange.phase = .waitingForToken
        self.exchange = exchange
        let token = proxy.currentToken
        if token == nil, exchange.route.settings.tokenWait > .zero {
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.waitForToken(timeout: exchange.route.settings.tokenWait, on: context.eventLoop) { token in
                handler.value.connect(token: token)
            }
        } else {
            connect(token: token)
        }
    }

    func connect(token: String?, fresh: Bool = false) {
        guard let context, exchange != nil else { return }
        exchange!.sentToken = token
        exchange!.phase = .connecting
        let route = exchange!.route
        proxy.pools.acquire(route, on: context.eventLoop, fresh: fresh).assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success(let acquired):
                guard let connection = try? UpstreamConnection(acquired) else {
                    acquired.channel.close(promise: nil)
                    upstreamFailed(.closed, nil)
                    return
                }
                guard exchange != nil, self.context != nil else {
                    proxy.pools.release(connection, on: context.eventLoop)
                    return
                }
                attach(connection)
            case .failure(let error):
                upstreamFailed(error is ChannelError ? .timeout : .unreachable, error)
            }
        }
    }

    private func attach(_ connection: UpstreamConnection) {
        guard context != nil, var exchange else { return }
        connection.handler.delegate = self
        exchange.upstream = connection
        exchange.phase = exchange.requestComplete || !exchange.streaming ? .awaitingAnswer : .receiving
        let head = ProxyRules.upstreamHead(
            exchange.head, upstream: exchange.route.settings.upstream, token: exchange.sentToken, placement: exchange.route.settings.tokenIn,
            cookieApplies: proxy.provider.cookieManager.applies(toPath:), framing: exchange.framing)
        connection.handler.send(.head(head))
        if exchange.body.readableBytes > 0 {
            connection.handler.send(.body(.byteBuffer(exchange.body)))
            // A streamed body's bytes are gone once sent; a kept one stays for a replay.
            if exchange.streaming { exchange.body.clear() }
        }
        exchange.upstreamHeadSent = true
        if exchange.requestComplete {
            connection.handler.send(.end(nil))
            exchange.upstreamRequestComplete = true
        }
        connection.handler.flush()
        exchange.sentAt = .now()
        armStallTimer(exchange)
        self.exchange = exchange
        resumeClientReads()
    }

    // MARK: Backpressure

    /// Reads from the client wait while a streamed body has nowhere to go.
    private var wantsClientReads: Bool {
        guard let exchange, exchange.streaming, !exchange.requestComplete else { return true }
        guard let upstream = exchange.upstream, exchange.upstreamHeadSent else { return false }
        return upstream.channel.isWritable
    }

    func read(context: ChannelHandlerContext) {
        if wantsClientReads {
            context.read()
        } else {
            clientReadPending = true
        }
    }

    func resumeClientReads() {
        guard clientReadPending, wantsClientReads, let context else { return }
        clientReadPending = false
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { exchange?.upstream?.handler.resumeReads() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client left: an upstream connection in the middle of its answer cannot be reused.
        stall.cancel()
        if let exchange {
            exchange.upstream?.handler.delegate = nil
            exchange.upstream?.channel.close(promise: nil)
            self.exchange = nil
        }
        context.fireChannelInactive()
    }
}
