import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFHTTPWire
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the client gets: the upstream's answer, a replay's after a challenge, or an error of the
/// proxy's own.
extension ProxyHandler {
    // MARK: Challenges

    func challenged(_ answer: ProxyExchange.Answer) {
        guard let context, let exchange else { return }
        let decision = ProxyRules.afterChallenge(
            replayable: exchange.replayable, replayed: exchange.replayed, sentToken: exchange.sentToken,
            currentToken: proxy.token(for: exchange.route))
        switch decision {
        case .passOn:
            passOn(answer)
        case .replay(let token):
            replay(with: token)
        case .refresh:
            exchange.phase = .refreshing(answer)
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.refreshToken(for: exchange.route, timeout: max(exchange.route.settings.tokenWait, .seconds(1)), on: context.eventLoop) { token in
                let this = handler.value
                guard let exchange = this.exchange, case .refreshing(let answer) = exchange.phase else { return }
                switch ProxyRules.afterRefresh(token, sentToken: exchange.sentToken) {
                case .replay(let token): this.replay(with: token)
                default: this.passOn(answer)
                }
            }
        }
    }

    private func replay(with token: String) {
        guard let exchange else { return }
        exchange.replayed = true
        exchange.upstreamHeadSent = false
        exchange.upstreamRequestComplete = false
        proxy.board.replays.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, "replay")
        connect(token: token)
    }

    private func passOn(_ answer: ProxyExchange.Answer) {
        guard let exchange else { return }
        exchange.phase = .answering
        sendHead(answer.head, answer.framing, exchange)
        if answer.body.readableBytes > 0 { context?.write(wrapOutboundOut(answer.body), promise: nil) }
        finish()
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
        exchange.upstream = nil
        if exchange.answering {
            closeClient()
            return
        }
        let detail = error.map { ": \($0)" } ?? ""
        proxy.logger.warning("proxy: upstream \(kind.rawValue)\(detail)", metadata: ["upstream": "\(exchange.route.settings.upstream.url)"])
        // The rest of a streamed body is not read: the connection cannot carry another request.
        if !exchange.requestComplete {
            closeAfterAnswer = true
            closing = true
        }
        switch kind {
        case .timeout:
            answerError(
                .gatewayTimeout, "upstreamTimeout",
                "the upstream did not answer within \(exchange.route.settings.upstreamTimeout.nanoseconds / 1_000_000_000) s")
        case .closed:
            answerError(.badGateway, "upstreamClosed", "the upstream closed the connection before answering")
        case .unreachable:
            answerError(.badGateway, "upstreamUnreachable", "cannot reach the upstream \(exchange.route.settings.upstream.url)")
        }
    }

    // MARK: Answering

    /// An answer of the proxy's own (an error), as JSON `{"error","message"}`.
    func answerError(_ status: HTTPResponseStatus, _ code: String, _ message: String) {
        answerError(.error(status, code, message))
    }

    func answerError(_ reply: HTTPReply) {
        guard let context else { return }
        if let exchange, let upstream = exchange.upstream {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
            exchange.upstream = nil
        }
        answerBegins()
        keepsAfterAnswer = keepsConnection(exchange)
        count(reply.status)
        context.write(wrapOutboundOut(reply.encoded(keepAlive: keepsAfterAnswer, allocator: context.channel.allocator)), promise: nil)
        finish()
    }

    func sendHead(_ head: HTTPHead, _ framing: HTTPFraming, _ exchange: ProxyExchange) {
        guard let context else { return }
        answerBegins()
        keepsAfterAnswer = keepsConnection(exchange)
        count(HTTPResponseStatus(statusCode: head.status))
        var bytes = context.channel.allocator.buffer(capacity: head.bytes.readableBytes + 128)
        ProxyRules.writeClientHead(head, framing: framing, clientFraming: exchange.clientFraming, keepAlive: keepsAfterAnswer, into: &bytes)
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    /// Whether the client's connection carries another request after this answer: not when
    /// either side asked to close, the daemon stops, or a reload took the peer's access away
    /// (TENANT-3). Decided once, as the answer's head is written, so that the head says what follows.
    private func keepsConnection(_ exchange: ProxyExchange?) -> Bool {
        guard let exchange, exchange.keepAlive, !closeAfterAnswer, exchange.clientFraming == .asUpstream, !proxy.shuttingDown.load(ordering: .relaxed)
        else { return false }
        return stillAllowed()
    }

    private func count(_ status: HTTPResponseStatus) {
        proxy.board.requests.add(1, ordering: .relaxed)
        proxy.requestCounters[Int(min(max(status.code / 100, 1), 5)) - 1].increment()
    }

    func armStallTimer(_ exchange: ProxyExchange) {
        guard let eventLoop = context?.eventLoop else { return }
        stall.move(to: eventLoop.now + exchange.route.settings.upstreamTimeout, on: eventLoop) { [self] in upstreamTimedOut() }
    }

    func stopStallTimer() {
        stall.disarm()
    }

    /// The answer is complete: the next request, or the connection's end.
    func finish() {
        guard let context else { return }
        let keepAlive = keepsAfterAnswer
        keepsAfterAnswer = false
        announcedServing = false
        exchange = nil
        // Written out before the guard hears of the end: on a graceful stop it closes at once.
        guard keepAlive else {
            closing = true
            let written = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)))
            context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: false), promise: nil)
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            return
        }
        context.flush()
        let pending = (received?.readableBytes ?? 0) > 0
        context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: pending), promise: nil)
        resumeClientReads()
        process()
    }

    /// The connection cannot go on (part of an answer went out, or the request's body is broken
    /// after part of it went upstream): both sides close.
    func closeClient() {
        stopStallTimer()
        if let upstream = exchange?.upstream {
            upstream.handler.delegate = nil
            upstream.channel.close(promise: nil)
        }
        exchange = nil
        closing = true
        context?.close(promise: nil)
    }
}
