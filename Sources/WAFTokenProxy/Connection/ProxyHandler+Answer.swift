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

    /// A challenge's whole answer is held (`exchange.held`): passed on, replayed, or a refresh first.
    func challenged() {
        guard let context, let exchange else { return }
        switch machine.challenged(sentToken: exchange.sentToken, currentToken: proxy.token(for: exchange.route)) {
        case .passOn:
            passOn()
        case .replay(let token):
            replay(with: token)
        case .refresh:
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            proxy.refreshToken(for: exchange.route, timeout: TimeAmount(max(exchange.route.settings.tokenWait, .seconds(1))), on: context.eventLoop) {
                token in
                let this = handler.value
                guard let exchange = this.exchange else { return }
                switch this.machine.refreshed(token, sentToken: exchange.sentToken) {
                case .replay(let token): this.replay(with: token)
                case .passOn, .refresh: this.passOn()
                case nil: return
                }
            }
        }
    }

    private func replay(with token: String) {
        exchange?.held = nil
        proxy.board.replays.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, "replay")
        connect(token: token)
    }

    private func passOn() {
        guard let exchange, let answer = exchange.held else { return }
        exchange.held = nil
        sendHead(answer.head, answer.framing)
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
        exchange.dropUpstream()
        // After an error answer, a request whose body was not all read closes the connection.
        switch machine.upstreamFailed() {
        case .none: return
        case .closeClient: return closeClient()
        case .answer: break
        }
        let detail = error.map { ": \($0)" } ?? ""
        // Once a minute per kind of failure, with how many there were: an upstream that is down
        // fails every request, and one line each would fill the journal (the metric counts them all).
        proxy.limits.log(
            "upstream \(kind.rawValue)", uid: 0, level: .warning, "proxy: upstream \(kind.rawValue)\(detail)",
            metadata: ["upstream": "\(exchange.route.settings.upstream.url)"], logger: proxy.logger)
        switch kind {
        case .timeout: answerError(.upstreamTimedOut(seconds: exchange.route.settings.upstreamTimeout.components.seconds))
        case .closed: answerError(.upstreamClosed)
        case .unreachable: answerError(.upstreamUnreachable(url: "\(exchange.route.settings.upstream.url)"))
        }
    }

    // MARK: Answering

    /// An answer of the proxy's own: an error of the catalog. `toHead`: whether it answers a HEAD
    /// (when not given, the exchange's request says).
    func answerError(_ error: DaemonError, toHead: Bool? = nil) {
        let reply = error.reply
        guard let context else { return }
        if let exchange, exchange.upstream != nil {
            exchange.dropUpstream()
            _ = machine.upstreamDetached()
        }
        answerBegins()
        let keepAlive = machine.answerHeadGoes(mayKeep: mayKeepConnection)
        count(reply.status)
        // A HEAD gets the head alone: a body after it would be read as the next answer.
        let headOnly = toHead ?? (exchange?.head.isHead == true)
        context.write(wrapOutboundOut(reply.encoded(keepAlive: keepAlive, headOnly: headOnly, allocator: context.channel.allocator)), promise: nil)
        finish()
    }

    /// The upstream's answer head (or a held one) to the client, framed as the machine decided.
    func sendHead(_ head: HTTPHead, _ framing: HTTPFraming) {
        guard let context, let clientFraming = machine.exchange?.clientFraming else { return }
        answerBegins()
        let keepAlive = machine.answerHeadGoes(mayKeep: mayKeepConnection)
        count(HTTPResponseStatus(statusCode: head.status))
        var bytes = context.channel.allocator.buffer(capacity: head.bytes.readableBytes + 128)
        ProxyRules.writeClientHead(head, framing: framing, clientFraming: clientFraming, keepAlive: keepAlive, into: &bytes)
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    /// What the machine cannot know by itself: whether the daemon stops, and whether a reload
    /// took the peer's access away (TENANT-3).
    private func mayKeepConnection() -> Bool {
        !proxy.shuttingDown.load(ordering: .relaxed) && stillAllowed()
    }

    private func count(_ status: HTTPResponseStatus) {
        proxy.board.requests.add(1, ordering: .relaxed)
        proxy.requestCounters[Int(min(max(status.code / 100, 1), 5)) - 1].increment()
    }

    func armStallTimer(_ exchange: ProxyExchange) {
        guard let eventLoop = context?.eventLoop else { return }
        stall.move(to: eventLoop.now + TimeAmount(exchange.route.settings.upstreamTimeout), on: eventLoop, expired: { [self] in upstreamTimedOut() })
    }

    func stopStallTimer() {
        stall.disarm()
    }

    /// The answer is complete: the next request, or the connection's end.
    func finish() {
        guard let context else { return }
        let keepAlive = machine.answerFinished()
        exchange = nil
        // Written out before the guard hears of the end: on a graceful stop it closes at once.
        guard keepAlive else {
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
        exchange?.dropUpstream()
        _ = machine.closed()
        exchange = nil
        context?.close(promise: nil)
    }
}
