import NIOCore
import NIOHTTP1

/// Sending the request upstream, and the upstream's answer: passed on as it arrives, or, for a
/// challenge, kept while a new token is found and the request replayed once.
extension ProxyHandler: UpstreamDelegate {
    /// A challenge's answer is kept up to this size to be passed on unchanged if no replay
    /// happens; a larger one is passed on at once.
    static let maximumHeldChallenge = 1 << 20

    // MARK: Sending it upstream

    /// The request is ready to go (complete, or streaming): a token, a connection, then the bytes.
    func dispatch() {
        guard let context, let exchange else { return }
        exchange.phase = .waitingForToken
        let token = proxy.token(for: exchange.route)
        if token == nil, exchange.route.settings.tokenWait > .zero {
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.waitForToken(for: exchange.route, timeout: exchange.route.settings.tokenWait, on: context.eventLoop) { token in
                handler.value.connect(token: token)
            }
        } else {
            connect(token: token)
        }
    }

    func connect(token: String?, fresh: Bool = false) {
        guard let context, let current = exchange else { return }
        current.sentToken = token
        current.phase = .connecting
        let route = current.route
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
        guard context != nil, let exchange else { return }
        connection.handler.delegate = self
        connection.handler.expectAnswer(toHead: exchange.head.isHead, decodeChunks: exchange.head.minorVersion == 0)
        exchange.upstream = connection
        exchange.phase = exchange.requestComplete || !exchange.streaming ? .awaitingAnswer : .receiving
        let framing = exchange.framing
        var request = connection.channel.allocator.buffer(capacity: exchange.head.bytes.readableBytes + 512)
        ProxyRules.writeUpstreamHead(
            exchange.head, target: exchange.target, upstream: exchange.route.settings.upstream, token: exchange.sentToken,
            placement: exchange.route.settings.tokenIn,
            cookieApplies: proxy.provider.cookieManager.applies(toPath:), framing: framing, into: &request)
        connection.handler.send(request)
        if exchange.body.readableBytes > 0 {
            send(exchange.body, to: connection, framing: framing)
            // A streamed body's bytes are gone once sent; a kept one stays for a replay.
            if exchange.streaming { exchange.body.clear() }
        }
        exchange.upstreamHeadSent = true
        if exchange.requestComplete {
            if framing == .chunked { connection.handler.send(connection.channel.allocator.buffer(staticString: "0\r\n\r\n")) }
            exchange.upstreamRequestComplete = true
        }
        connection.handler.flush()
        exchange.sentAt = .now()
        armStallTimer(exchange)
        resumeClientReads()
    }

    // MARK: The answer

    var wantsUpstreamReads: Bool { context?.channel.isWritable ?? true }

    func upstream(_ part: UpstreamHandler.Part) {
        guard let exchange else { return }
        switch (part, exchange.phase) {
        case (.head(let head, let framing), .awaitingAnswer), (.head(let head, let framing), .receiving):
            stopStallTimer()
            proxy.upstreamTimer.recordNanoseconds((NIODeadline.now() - exchange.sentAt).nanoseconds)
            exchange.clientFraming = ProxyRules.clientFraming(framing, clientMinorVersion: exchange.head.minorVersion)
            let challenge = ProxyRules.isChallenge(head)
            if challenge {
                proxy.board.challenges.add(1, ordering: .relaxed)
                proxy.metrics.countProxyEvent(provider: proxy.providerName, "challenge")
            }
            if challenge, exchange.replayable, !exchange.replayed {
                exchange.phase = .holdingChallenge(.init(head: head, framing: framing, body: context!.channel.allocator.buffer(capacity: 0)))
            } else {
                exchange.phase = .answering
                sendHead(head, framing, exchange)
            }
            armStallTimer(exchange)
        case (.body(var bytes), .holdingChallenge(var answer)):
            answer.body.writeBuffer(&bytes)
            if answer.body.readableBytes > Self.maximumHeldChallenge {
                exchange.phase = .answering
                sendHead(answer.head, answer.framing, exchange)
                context?.write(wrapOutboundOut(answer.body), promise: nil)
            } else {
                exchange.phase = .holdingChallenge(answer)
            }
            armStallTimer(exchange)
        case (.body(let bytes), .answering):
            context?.write(wrapOutboundOut(bytes), promise: nil)
            armStallTimer(exchange)
        case (.end, .holdingChallenge(let answer)):
            stopStallTimer()
            releaseUpstream()
            challenged(answer)
            return
        case (.end, .answering):
            stopStallTimer()
            releaseUpstream()
            finish()
            return
        default:
            // An answer part out of order (an answer before the request was sent): not reusable.
            upstreamFailed(.closed, nil)
            return
        }
    }

    func upstreamReadComplete() {
        context?.flush()
    }

    func upstreamWritabilityChanged(writable: Bool) {
        if writable { resumeClientReads() }
    }

    func upstreamClosed() {
        guard let exchange, let upstream = exchange.upstream else { return }
        if case .answering = exchange.phase {
            // Part of the answer went out: the client can only learn of the failure by the close.
            closeClient()
            return
        }
        // A kept-alive connection the upstream closed before this request got there: once more on a
        // new one, when the request can be sent again.
        let untouched: Bool = if case .awaitingAnswer = exchange.phase { true } else { false }
        if untouched, upstream.reused, !exchange.retriedClosedConnection, exchange.replayable {
            exchange.retriedClosedConnection = true
            exchange.upstream = nil
            exchange.upstreamHeadSent = false
            stopStallTimer()
            connect(token: exchange.sentToken, fresh: true)
            return
        }
        upstreamFailed(.closed, nil)
    }

    /// The upstream connection back to its pool when it carried a whole request and answer.
    func releaseUpstream() {
        guard let context, let exchange, let upstream = exchange.upstream else { return }
        exchange.upstream = nil
        if exchange.upstreamRequestComplete {
            proxy.pools.release(upstream, on: context.eventLoop)
        } else {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
        }
    }
}
