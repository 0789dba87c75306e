import NIOCore
import NIOHTTP1

/// The upstream's answer: passed on as it arrives, or, for a challenge, kept while a new token is
/// found and the request replayed once.
extension ProxyHandler: UpstreamDelegate {
    /// A challenge's answer is kept up to this size to be passed on unchanged if no replay
    /// happens; a larger one is passed on at once.
    static let maximumHeldChallenge = 1 << 20

    var wantsUpstreamReads: Bool { context?.channel.isWritable ?? true }

    func upstream(_ part: HTTPClientResponsePart) {
        guard var exchange else { return }
        switch (part, exchange.phase) {
        case (.head(let head), .awaitingAnswer), (.head(let head), .receiving):
            stopStallTimer()
            proxy.metrics.recordUpstreamLatency(provider: proxy.providerName, nanoseconds: (NIODeadline.now() - exchange.sentAt).nanoseconds)
            if ProxyRules.isChallenge(head) {
                proxy.board.challenges.add(1, ordering: .relaxed)
                proxy.metrics.countProxyEvent(provider: proxy.providerName, "challenge")
            }
            if ProxyRules.isChallenge(head), exchange.replayable, !exchange.replayed {
                exchange.phase = .holdingChallenge(head, context!.channel.allocator.buffer(capacity: 0))
            } else {
                exchange.phase = .answering
                sendHead(head, &exchange)
            }
            armStallTimer(exchange)
        case (.body(var bytes), .holdingChallenge(let head, var held)):
            held.writeBuffer(&bytes)
            if held.readableBytes > Self.maximumHeldChallenge {
                exchange.phase = .answering
                sendHead(head, &exchange)
                context?.write(wrapOutboundOut(.body(.byteBuffer(held))), promise: nil)
            } else {
                exchange.phase = .holdingChallenge(head, held)
            }
            armStallTimer(exchange)
        case (.body(let bytes), .answering):
            context?.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
            armStallTimer(exchange)
        case (.end, .holdingChallenge(let head, let held)):
            stopStallTimer()
            self.exchange = exchange
            releaseUpstream()
            challenged(head, held)
            return
        case (.end, .answering):
            stopStallTimer()
            self.exchange = exchange
            releaseUpstream()
            finish(.end(nil))
            return
        default:
            // An answer part out of order (an answer before the request was sent): not reusable.
            self.exchange = exchange
            upstreamFailed(.closed, nil)
            return
        }
        self.exchange = exchange
    }

    func upstreamReadComplete() {
        context?.flush()
    }

    func upstreamWritabilityChanged(writable: Bool) {
        if writable { resumeClientReads() }
    }

    func upstreamClosed() {
        guard let exchange, exchange.upstream != nil else { return }
        if case .answering = exchange.phase {
            // Part of the answer went out: the client can only learn of the failure by the close.
            closeClient()
            return
        }
        // A kept-alive connection the upstream closed before this request got there: once more on a
        // new one, when the request can be sent again.
        let untouched: Bool = if case .awaitingAnswer = exchange.phase { true } else { false }
        if untouched, exchange.upstream!.reused, !exchange.retriedClosedConnection, exchange.replayable {
            self.exchange!.retriedClosedConnection = true
            self.exchange!.upstream = nil
            self.exchange!.upstreamHeadSent = false
            stopStallTimer()
            connect(token: exchange.sentToken, fresh: true)
            return
        }
        upstreamFailed(.closed, nil)
    }

    // MARK: Challenges

    private func challenged(_ head: HTTPResponseHead, _ held: ByteBuffer) {
        guard let context, let exchange else { return }
        let answer = ProxyRules.afterChallenge(
            replayable: exchange.replayable, replayed: exchange.replayed, sentToken: exchange.sentToken, currentToken: proxy.currentToken)
        switch answer {
        case .passOn:
            passOn(head, held)
        case .replay(let token):
            replay(with: token)
        case .refresh:
            self.exchange!.phase = .refreshing(head, held)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.refreshToken(timeout: max(exchange.route.settings.tokenWait, .seconds(1)), on: context.eventLoop) { token in
                let this = handler.value
                guard let exchange = this.exchange, case .refreshing(let head, let held) = exchange.phase else { return }
                switch ProxyRules.afterRefresh(token, sentToken: exchange.sentToken) {
                case .replay(let token): this.replay(with: token)
                default: this.passOn(head, held)
                }
            }
        }
    }

    private func replay(with token: String) {
        guard exchange != nil else { return }
        exchange!.replayed = true
        exchange!.upstreamHeadSent = false
        exchange!.upstreamRequestComplete = false
        proxy.board.replays.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, "replay")
        connect(token: token)
    }

    private func passOn(_ head: HTTPResponseHead, _ held: ByteBuffer) {
        guard var exchange else { return }
        exchange.phase = .answering
        sendHead(head, &exchange)
        self.exchange = exchange
        if held.readableBytes > 0 { context?.write(wrapOutboundOut(.body(.byteBuffer(held))), promise: nil) }
        finish(.end(nil))
    }

    // MARK: Failures

    func upstreamTimedOut() {
        upstreamFailed(.timeout, nil)
    }

    /// Why the upstream gave no answer; the name is the metrics event's.
    enum UpstreamFailure: String {
        case timeout, closed, unreachable
    }

    /// The upstream cannot answer: 502 (unreachable, closed) or 504 (timed out) while nothing of
    /// an answer went out; a closed client connection otherwise.
    func upstreamFailed(_ kind: UpstreamFailure, _ error: (any Error)?) {
        guard let exchange else { return }
        stopStallTimer()
        proxy.board.upstreamErrors.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, kind.rawValue)
        if let upstream = exchange.upstream {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
        }
        self.exchange!.upstream = nil
        if exchange.answering {
            closeClient()
            return
        }
        let detail = error.map { ": \($0)" } ?? ""
        proxy.logger.warning("proxy: upstream \(kind.rawValue)\(detail)", metadata: ["upstream": "\(exchange.route.settings.upstream.url)"])
        // The rest of a streamed body is not read: the connection cannot carry another request.
        if !exchange.requestComplete { closeAfterAnswer = true }
        switch kind {
        case .timeout:
            answerError(.gatewayTimeout, "upstreamTimeout", "the upstream did not answer within \(exchange.route.settings.upstreamTimeout.nanoseconds / 1_000_000_000) s")
        case .closed:
            answerError(.badGateway, "upstreamClosed", "the upstream closed the connection before answering")
        case .unreachable:
            answerError(.badGateway, "upstreamUnreachable", "cannot reach the upstream \(exchange.route.settings.upstream.url)")
        }
    }

    // MARK: Answering

    /// An answer of the proxy's own (an error), as JSON `{"error","message"}`.
    func answerError(_ status: HTTPResponseStatus, _ code: String, _ message: String) {
        let response = APIResponse.error(status, code, message)
        var headers = HTTPHeaders(response.headers)
        headers.add(name: "Content-Length", value: String(response.body.count))
        if closeAfterAnswer || exchange?.keepAlive == false { headers.add(name: "Connection", value: "close") }
        count(status)
        context?.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if let allocator = context?.channel.allocator {
            context?.write(wrapOutboundOut(.body(.byteBuffer(allocator.buffer(bytes: response.body)))), promise: nil)
        }
        finish(.end(nil))
    }

    private func sendHead(_ head: HTTPResponseHead, _ exchange: inout ProxyExchange) {
        let keepAlive = exchange.keepAlive && !closeAfterAnswer && !proxy.shuttingDown.load(ordering: .relaxed)
        count(head.status)
        context?.write(wrapOutboundOut(.head(ProxyRules.clientHead(head, keepAlive: keepAlive))), promise: nil)
    }

    private func count(_ status: HTTPResponseStatus) {
        proxy.board.requests.add(1, ordering: .relaxed)
        proxy.metrics.countProxyRequest(provider: proxy.providerName, status: status.code)
    }

    func armStallTimer(_ exchange: ProxyExchange) {
        guard let eventLoop = context?.eventLoop else { return }
        stall.move(to: eventLoop.now + exchange.route.settings.upstreamTimeout, on: eventLoop) { [self] in upstreamTimedOut() }
    }

    func stopStallTimer() {
        stall.disarm()
    }

    /// The upstream connection back to its pool when it carried a whole request and answer.
    private func releaseUpstream() {
        guard let context, let upstream = exchange?.upstream else { return }
        exchange!.upstream = nil
        if exchange!.upstreamRequestComplete {
            proxy.pools.release(upstream, on: context.eventLoop)
        } else {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
        }
    }

    private func finish(_ end: HTTPServerResponsePart) {
        guard let context else { return }
        let keepAlive = (exchange?.keepAlive ?? false) && !closeAfterAnswer
        exchange = nil
        let written = context.writeAndFlush(wrapOutboundOut(end))
        context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: false), promise: nil)
        if !keepAlive || proxy.shuttingDown.load(ordering: .relaxed) {
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
        resumeClientReads()
    }

    private func closeClient() {
        stopStallTimer()
        exchange = nil
        context?.close(promise: nil)
    }
}
