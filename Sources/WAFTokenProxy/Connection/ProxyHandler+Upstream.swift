import NIOCore
import NIOHTTP1

/// Sending the request upstream, and the upstream's answer: passed on as it arrives, or, for a
/// challenge, kept while a new token is found and the request replayed once.
extension ProxyHandler: UpstreamDelegate {
    // MARK: Sending it upstream

    /// The request is ready to go (complete, or streaming): a token, a connection, then the bytes.
    func dispatch() {
        guard let context, let exchange else { return }
        machine.dispatching()
        let token = proxy.token(for: exchange.route)
        if token == nil, exchange.route.settings.tokenWait > .zero {
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.waitForToken(for: exchange.route, timeout: TimeAmount(exchange.route.settings.tokenWait), on: context.eventLoop) { token in
                handler.value.connect(token: token)
            }
        } else {
            connect(token: token)
        }
    }

    func connect(token: String?, fresh: Bool = false) {
        guard let context, let current = exchange else { return }
        current.sentToken = token
        machine.connecting()
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
        guard context != nil, let exchange, let attach = machine.upstreamAttached(reused: connection.reused) else { return }
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
        connection.handler.flush()
        exchange.sentAt = .now()
        armStallTimer(exchange)
        resumeClientReads()
    }

    // MARK: The answer

    var wantsUpstreamReads: Bool { context?.channel.isWritable ?? true }

    func upstream(_ part: UpstreamHandler.Part) {
        guard let exchange, let context else { return }
        switch part {
        case .head(let head, let framing):
            let clientFraming = ProxyRules.clientFraming(framing, clientMinorVersion: exchange.head.minorVersion)
            let challenge = ProxyRules.isChallenge(head)
            switch machine.answerHeadArrived(challenge: challenge, clientFraming: clientFraming) {
            case .fail: return upstreamFailed(.closed, nil)
            case .hold: exchange.held = .init(head: head, framing: framing, body: context.channel.allocator.buffer(capacity: 0))
            case .pass, .passHeld: sendHead(head, framing)
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
            switch machine.answerBodyArrived(bytes.readableBytes, mayHold: mayHold) {
            case .fail:
                return upstreamFailed(.closed, nil)
            case .pass:
                context.write(wrapOutboundOut(bytes), promise: nil)
            case .hold:
                exchange.held?.body.writeBuffer(&bytes)
            case .passHeld:
                guard var held = exchange.held else { return upstreamFailed(.closed, nil) }
                exchange.held = nil
                held.body.writeBuffer(&bytes)
                sendHead(held.head, held.framing)
                context.write(wrapOutboundOut(held.body), promise: nil)
            }
            armStallTimer(exchange)
        case .end:
            let end = machine.answerEnded()
            guard end != .fail else { return upstreamFailed(.closed, nil) }
            stopStallTimer()
            releaseUpstream()
            if end == .challenged { challenged() } else { finish() }
        }
    }

    func upstreamReadComplete() {
        context?.flush()
    }

    func upstreamWritabilityChanged(writable: Bool) {
        if writable { resumeClientReads() }
    }

    func upstreamClosed() {
        guard let exchange else { return }
        switch machine.upstreamClosed() {
        case .none:
            return
        case .closeClient:
            closeClient()
        case .retry:
            exchange.upstream = nil
            stopStallTimer()
            connect(token: exchange.sentToken, fresh: true)
        case .fail:
            upstreamFailed(.closed, nil)
        }
    }

    /// The upstream connection back to its pool when it carried a whole request and answer.
    func releaseUpstream() {
        guard let context, let exchange, let upstream = exchange.upstream else { return }
        guard machine.upstreamDetached() else { return exchange.dropUpstream() }
        exchange.upstream = nil
        proxy.pools.release(upstream, on: context.eventLoop)
    }
}
