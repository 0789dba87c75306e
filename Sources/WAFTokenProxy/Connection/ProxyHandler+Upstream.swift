import NIOCore
import NIOHTTP1

/// Sending the request upstream, and the upstream's answer: passed on as it arrives, or, for a
/// challenge, kept while a new token is found and the request replayed once.
extension ProxyHandler: UpstreamDelegate {
    // MARK: Sending it upstream

    /// The request is ready to go (complete, or streaming): a token, a connection, then the bytes.
    func dispatch(_ exchange: ProxyExchange) {
        guard let context else { return }
        let token = proxy.token(for: exchange.route)
        if token == nil, exchange.route.settings.tokenWait > .zero {
            let waiting = NIOLoopBound((self, exchange), eventLoop: context.eventLoop)
            proxy.waitForToken(for: exchange.route, timeout: TimeAmount(exchange.route.settings.tokenWait), on: context.eventLoop) { token in
                let (handler, exchange) = waiting.value
                handler.tokenArrived(token, for: exchange)
            }
        } else {
            tokenArrived(token, for: exchange)
        }
    }

    private func tokenArrived(_ token: String?, for exchange: ProxyExchange) {
        guard machine.tokenReady(for: exchange) else { return }
        connect(exchange, token: token)
    }

    /// A connection for the request, which the machine has `connecting`.
    func connect(_ exchange: ProxyExchange, token: String?, fresh: Bool = false) {
        guard let context else { return }
        exchange.sentToken = token
        proxy.pools.acquire(exchange.route, on: context.eventLoop, fresh: fresh).assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success(let acquired):
                guard let connection = try? UpstreamConnection(acquired) else {
                    acquired.channel.close(promise: nil)
                    if machine.isConnecting(exchange) { upstreamFailed(.closed, nil) }
                    return
                }
                guard self.context != nil, let attach = machine.upstreamAttached(for: exchange, reused: connection.reused) else {
                    proxy.pools.release(connection, on: context.eventLoop)
                    return
                }
                self.attach(connection, attach, exchange)
            case .failure(let error):
                if machine.isConnecting(exchange) { upstreamFailed(error is ChannelError ? .timeout : .unreachable, error) }
            }
        }
    }

    private func attach(_ connection: UpstreamConnection, _ attach: ProxyConnectionMachine<ProxyExchange>.Attach, _ exchange: ProxyExchange) {
        connection.handler.delegate = self
        connection.handler.expectAnswer(toHead: exchange.head.isHead, decodeChunks: exchange.head.minorVersion == 0)
        exchange.upstream = connection
        let framing = attach.framing
        var request = connection.channel.allocator.buffer(capacity: exchange.head.bytes.readableBytes + 512)
        ProxyRules.writeUpstreamHead(
            exchange.head, target: exchange.target, upstream: exchange.route.settings.upstream, token: exchange.sentToken,
            placement: exchange.route.settings.tokenIn,
            cookieApplies: proxy.provider.cookieManager.applies(toPath:), framing: framing, into: &request)
        connection.handler.send(request)
        if attach.sendKept { send(exchange.body, to: connection, framing: framing) }
        // A streamed body's bytes are gone once sent; a kept one stays for a replay.
        if attach.dropKept {
            exchange.body.clear()
            exchange.holding.releaseAll()
        }
        if attach.endChunked { connection.handler.send(connection.channel.allocator.buffer(staticString: "0\r\n\r\n")) }
        // The timer before the flush: a write that fails in it closes the connection at once, and
        // what that close ends (an answer, a retry) stops or moves the timer, which must be there.
        exchange.sentAt = .now()
        armStallTimer(exchange)
        connection.handler.flush()
        resumeClientReads()
    }

    // MARK: The answer

    var wantsUpstreamReads: Bool { context?.channel.isWritable ?? true }

    /// A part of the answer from the request's upstream connection (reported only while attached:
    /// every detach clears the connection's delegate).
    func upstream(_ part: UpstreamHandler.Part) {
        guard let exchange = machine.request, let context else { return }
        switch part {
        case .head(let head, let framing):
            let clientFraming = ProxyRules.clientFraming(framing, clientMinorVersion: exchange.head.minorVersion)
            let challenge = ProxyRules.isChallenge(head)
            switch machine.answerHeadArrived(challenge: challenge, clientFraming: clientFraming, mayKeep: mayKeepConnection) {
            case .hold:
                exchange.held = .init(head: head, framing: framing, clientFraming: clientFraming, body: context.channel.allocator.buffer(capacity: 0))
            case .pass(let keepAlive):
                answerBegins()
                sendHead(head, framing, clientFraming, keepAlive: keepAlive)
            }
            stopStallTimer()
            proxy.upstreamTimer.recordNanoseconds((NIODeadline.now() - exchange.sentAt).nanoseconds)
            if challenge {
                proxy.board.challenges.add(1, ordering: .relaxed)
                proxy.metrics.countProxyEvent(provider: proxy.providerName, "challenge")
                if let sent = exchange.sentToken, proxy.entry.canary.wasAccepted(sent) {
                    proxy.metrics.challengedAcceptedToken(provider: proxy.providerName)
                }
            } else if head.lists("x-amzn-waf-action", "captcha") {
                proxy.metrics.metCaptcha(provider: proxy.providerName)
            }
            armStallTimer(exchange)
        case .body(var bytes):
            // A challenge's body is held within the memory budget only (TENANT-12).
            let mayHold = !machine.holdsChallenge || exchange.holding.grow(by: bytes.readableBytes)
            switch machine.answerBodyArrived(bytes.readableBytes, mayHold: mayHold, mayKeep: mayKeepConnection) {
            case .pass:
                context.write(wrapOutboundOut(bytes), promise: nil)
            case .hold:
                exchange.held?.body.writeBuffer(&bytes)
            case .passHeld(let keepAlive):
                guard var held = exchange.held else { preconditionFailure("a challenge held without its answer") }
                exchange.held = nil
                held.body.writeBuffer(&bytes)
                answerBegins()
                sendHead(held.head, held.framing, held.clientFraming, keepAlive: keepAlive)
                context.write(wrapOutboundOut(held.body), promise: nil)
            }
            armStallTimer(exchange)
        case .end:
            stopStallTimer()
            switch machine.answerEnded() {
            case .finish(let ending, let pool):
                releaseUpstream(exchange, pool: pool)
                finish(ending)
            case .challenged(let pool):
                releaseUpstream(exchange, pool: pool)
                challenged(exchange)
            }
        }
    }

    func upstreamReadComplete() {
        context?.flush()
    }

    func upstreamWritabilityChanged(writable: Bool) {
        if writable { resumeClientReads() }
    }

    func upstreamClosed() {
        guard let exchange = machine.request else { return }
        switch machine.upstreamClosed() {
        case .closeClient(let exchange):
            closeClient(exchange)
        case .retry:
            exchange.dropUpstream()
            stopStallTimer()
            connect(exchange, token: exchange.sentToken, fresh: true)
        case .fail:
            upstreamFailed(.closed, nil)
        }
    }

    /// The request's upstream connection back to its pool when it carried a whole request and
    /// answer (`pool`); closed otherwise.
    private func releaseUpstream(_ exchange: ProxyExchange, pool: Bool) {
        guard let context, let upstream = exchange.upstream else { return }
        guard pool else { return exchange.dropUpstream() }
        exchange.upstream = nil
        proxy.pools.release(upstream, on: context.eventLoop)
    }
}
