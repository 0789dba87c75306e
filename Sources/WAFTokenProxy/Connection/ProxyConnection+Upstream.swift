import NIOCore
import WAFHTTPWire
import WAFProxyLoop

/// Sending the request upstream, and the upstream's answer: passed on as it arrives, or, for a
/// challenge, held while a new token is found and the request replayed once.
extension ProxyConnection: UpstreamDelegate {
    // MARK: Sending it upstream

    /// The request is ready to go (complete, or streaming): a token, a connection, then the bytes.
    func dispatch(_ exchange: ProxyExchange) {
        let token = worker.tokenView(for: exchange.route).token
        if token == nil, exchange.route.tokenWaitNanoseconds > 0 {
            proxy.waitForToken(for: exchange.route, timeout: exchange.route.tokenWaitNanoseconds, on: loop) {
                [self] token in
                tokenArrived(token, for: exchange)
                settle()
            }
        } else {
            tokenArrived(token, for: exchange)
        }
    }

    private func tokenArrived(_ token: String?, for exchange: ProxyExchange) {
        guard machine.tokenReady(for: exchange) else { return }
        connect(exchange, token: token)
    }

    /// A connection for the request, which the machine has `connecting`: a pooled one at once,
    /// without a callback (most requests), or a new one when it is under way.
    func connect(_ exchange: ProxyExchange, token: String?, fresh: Bool = false) {
        exchange.sentToken = token
        if !fresh, let pooled = worker.pool.takeIdle(for: exchange.route, share: exchange.share) {
            return connected(.connected(pooled), exchange)
        }
        // A name's lookup has no timeout of its own: the upstream's bounds it, and the connect.
        armStallTimer(exchange)
        let lookup = worker.pool.connect(exchange.route, for: exchange.share) { [self] outcome in
            exchange.cancelLookup = nil
            connected(outcome, exchange)
            settle()
        }
        if let lookup { exchange.cancelLookup = { [pool = worker.pool] in pool.cancelLookup(lookup) } }
    }

    private func connected(_ outcome: UpstreamPool.Outcome, _ exchange: ProxyExchange) {
        switch outcome {
        case .connected(let upstream):
            guard isOpen, let attach = machine.upstreamAttached(for: exchange, upstream, reused: upstream.reused) else {
                return worker.pool.release(upstream)
            }
            self.attach(upstream, attach, exchange)
        case .failed(let failure):
            guard machine.isConnecting(exchange) else { return }
            switch failure {
            case .timeout: upstreamFailed(.timeout)
            case .refused(let status): upstreamFailed(.egressRefused, status: status)
            case .unreachable, .closed: upstreamFailed(.unreachable)
            }
        case .overBudget:
            if machine.isConnecting(exchange) { upstreamFailed(.overBudget) }
        }
    }

    private func attach(_ connection: ProxyUpstream, _ attach: ProxyConnectionMachine<ProxyExchange, ProxyUpstream>.Attach, _ exchange: ProxyExchange)
    {
        connection.delegate = self
        connection.expectAnswer(toHead: exchange.head.isHead, decodeChunks: exchange.head.minorVersion == 0)
        let framing = attach.framing
        var request = worker.headBuffer()
        ProxyRules.writeUpstreamHead(
            exchange.head, target: exchange.target, upstream: exchange.route.settings.upstream, token: exchange.sentToken,
            placement: exchange.route.settings.tokenIn,
            cookieApplies: worker.tokenView(for: exchange.route).cookieApplies(toPath:), framing: framing, into: &request)
        connection.send(request)
        worker.written(request)
        if attach.sendKept { send(exchange.body, to: connection, framing: framing) }
        // A streamed body's bytes are gone once sent; a kept one stays for a replay.
        if attach.dropKept {
            exchange.body.clear()
            exchange.holding.releaseAll()
        }
        if attach.endChunked { connection.send(ByteBuffer(staticString: "0\r\n\r\n")) }
        // The timer before the flush: a write that fails in it closes the connection at once, and
        // what that close ends (an answer, a retry) stops or moves the timer, which must be there.
        exchange.sentAt = loop.time
        armStallTimer(exchange)
        connection.flush()
    }

    // MARK: The answer

    /// A part of the answer from the request's upstream connection (reported only while attached:
    /// every detach clears the connection's delegate).
    func upstream(_ part: AnswerReader.Part) {
        guard let exchange = machine.request, isOpen else { return }
        switch part {
        case .head(let head, let framing):
            let clientFraming = ProxyRules.clientFraming(framing, clientMinorVersion: exchange.head.minorVersion)
            let challenge = ProxyRules.isChallenge(head)
            switch machine.answerHeadArrived(head, framing: framing, challenge: challenge, clientFraming: clientFraming, mayKeep: mayKeepConnection) {
            case .hold:
                break
            case .pass(let keepAlive, let tellGuard):
                if tellGuard { requestStarted() }
                sendHead(head, framing, clientFraming, keepAlive: keepAlive)
            }
            stopStallTimer()
            exchange.route.upstreamTimer.recordNanoseconds(Int64(loop.time &- exchange.sentAt))
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
        case .body(let bytes):
            // A challenge's body is held within the memory budget only (TENANT-12).
            let mayHold = !machine.holdsChallenge || exchange.holding.grow(by: bytes.readableBytes)
            switch machine.answerBodyArrived(bytes, mayHold: mayHold, mayKeep: mayKeepConnection) {
            case .pass:
                socket.write(bytes)
            case .hold:
                break
            case .passHeld(let held, let keepAlive, let tellGuard):
                if tellGuard { requestStarted() }
                sendHead(held.head, held.framing, held.clientFraming, keepAlive: keepAlive)
                socket.write(held.body)
            }
            armStallTimer(exchange)
        case .end:
            stopStallTimer()
            switch machine.answerEnded() {
            case .finish(let ending):
                finish(ending)
            case .challenged(let upstream):
                let (connection, pool) = upstream
                release(connection, pool: pool)
                challenged(exchange)
            }
        }
    }

    func upstreamReadComplete() {
        settle()
    }

    func upstreamDrained() {
        settle()
    }

    func upstreamClosed(_ upstream: ProxyUpstream, _ failure: ProxyUpstream.Failure) {
        defer { settle() }
        guard let exchange = machine.request, isOpen else { return }
        switch machine.upstreamClosed(wroteNothing: upstream.wroteNothing) {
        case .closeClient(let exchange, let connection):
            connection.close()
            // An answer cut short reaches the client cut short: a reset, never a clean end.
            closeClient(exchange, reset: true)
        case .retry(let connection):
            connection.close()
            stopStallTimer()
            connect(exchange, token: exchange.sentToken, fresh: true)
        case .fail:
            switch failure {
            case .closed: upstreamFailed(.closed)
            case .timeout: upstreamFailed(.timeout)
            case .unreachable: upstreamFailed(.unreachable)
            case .refused(let status): upstreamFailed(.egressRefused, status: status)
            }
        }
    }

    /// An upstream connection the request let go: back to its pool when it carried a whole request
    /// and answer (`pool`), closed otherwise.
    func release(_ connection: ProxyUpstream, pool: Bool) {
        guard pool else { return connection.close() }
        worker.pool.release(connection)
    }
}
