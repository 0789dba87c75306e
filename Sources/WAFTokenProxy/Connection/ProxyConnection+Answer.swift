import Logging
import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFHTTPWire
import WAFProxyLoop
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the client gets: the upstream's answer, a replay's after a challenge, or an error of the
/// proxy's own.
extension ProxyConnection {
    // MARK: Challenges

    /// A challenge's whole answer is held (by the machine): passed on, replayed, or a refresh first.
    func challenged(_ exchange: ProxyExchange) {
        let current = proxy.token(for: exchange.route)
        switch machine.challenged(sentToken: exchange.sentToken, currentToken: current, mayKeep: mayKeepConnection) {
        case .passOn(let ending, let held):
            passOn(held, ending)
        case .replay(let token):
            replay(exchange, with: token)
        case .refresh:
            let timeout = max(exchange.route.settings.tokenWait, .seconds(1)).loopNanoseconds
            proxy.refreshToken(for: exchange.route, timeout: timeout, on: loop) { [self] token in
                defer { settle() }
                switch machine.refreshed(token, sentToken: exchange.sentToken, for: exchange, mayKeep: mayKeepConnection) {
                case .replay(let token): replay(exchange, with: token)
                case .passOn(let ending, let held): passOn(held, ending)
                case .refresh: preconditionFailure("a refresh after a refresh")
                case nil: return
                }
            }
        }
    }

    private func replay(_ exchange: ProxyExchange, with token: String) {
        proxy.board.replays.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, "replay")
        connect(exchange, token: token)
    }

    /// The held answer to the client as the upstream sent it.
    private func passOn(_ answer: ProxyConnectionMachine<ProxyExchange, ProxyUpstream>.HeldAnswer, _ ending: Ending) {
        if ending.tellGuard { requestStarted() }
        sendHead(answer.head, answer.framing, answer.clientFraming, keepAlive: ending.keepAlive)
        if answer.body.readableBytes > 0 { socket.write(answer.body) }
        finish(ending)
    }

    // MARK: Failures

    func upstreamTimedOut() {
        defer { settle() }
        // The timer runs while a connection is made (a lookup, a connect) and while the upstream
        // answers; every end of those waits stops it, and should one be missed, a timer that fires
        // with nothing waited on must find nothing to fail, not trap.
        guard machine.waitsOnUpstream || machine.request.map(machine.isConnecting) == true else { return }
        upstreamFailed(.timeout)
    }

    /// Why the upstream gave no answer; the name is the metrics event's.
    enum UpstreamFailure: String {
        case timeout, closed, unreachable
        /// Not the upstream's doing: the peer's share of the memory budget cannot take another
        /// upstream connection (TENANT-12).
        case overBudget
        /// The forward proxy refused the tunnel (EGRESS-3).
        case egressRefused
    }

    /// The upstream cannot answer: 502 (unreachable, closed), 504 (timed out) or 503 (the
    /// peer's share of the budget is full) while nothing of an answer went out; a reset of the
    /// client's connection otherwise.
    func upstreamFailed(_ kind: UpstreamFailure, status: Int? = nil) {
        guard let exchange = machine.request else { return }
        stopStallTimer()
        proxy.board.upstreamErrors.add(1, ordering: .relaxed)
        proxy.metrics.countProxyEvent(provider: proxy.providerName, kind.rawValue)
        let ending: Ending
        switch machine.upstreamFailed(mayKeep: mayKeepConnection) {
        case .closeClient(let exchange, let connection):
            connection?.close()
            return closeClient(exchange, reset: true)
        case .answer(let answer):
            ending = answer
        }
        // Once a minute per kind of failure, with how many there were: an upstream that is down
        // fails every request, and one line each would fill the journal (the metric counts them all).
        var metadata: Logger.Metadata = ["upstream": "\(exchange.route.settings.upstream.url)"]
        // The forward proxy's address, never its credentials.
        if let forward = exchange.route.settings.forwardProxy { metadata["egress"] = "\(forward.label)" }
        if let status { metadata["status"] = "\(status)" }
        proxy.limits.log(
            "upstream \(kind.rawValue)", uid: 0, level: .warning, "proxy: upstream \(kind.rawValue)", metadata: metadata, logger: proxy.logger)
        switch kind {
        case .timeout: answerError(.upstreamTimedOut(seconds: exchange.route.settings.upstreamTimeout.components.seconds), ending)
        case .closed: answerError(.upstreamClosed, ending)
        case .unreachable: answerError(.upstreamUnreachable(url: "\(exchange.route.settings.upstream.url)"), ending)
        case .overBudget: answerError(.overBudget, ending)
        case .egressRefused:
            answerError(
                .egressRefused(
                    proxy: exchange.route.settings.forwardProxy?.label ?? "?", target: exchange.route.settings.upstream.connectAuthority,
                    status: status ?? 0),
                ending)
        }
    }

    // MARK: Answering

    /// An answer of the proxy's own, an error of the catalog, to the request `ending` ended.
    /// `headOnly`: it answers a HEAD (when not given, the request says).
    func answerError(_ error: DaemonError, _ ending: Ending, headOnly: Bool? = nil) {
        guard isOpen else { return }
        if ending.tellGuard { requestStarted() }
        let reply = error.reply
        count(statusCode: Int(reply.status.code))
        // A HEAD gets the head alone: a body after it would be read as the next answer.
        let headOnly = headOnly ?? (ending.request?.head.isHead == true)
        socket.write(reply.encoded(keepAlive: ending.keepAlive, headOnly: headOnly, allocator: ByteBufferAllocator()))
        finish(ending)
    }

    /// The upstream's answer head (or a held one) to the client, framed as `clientFraming` says.
    func sendHead(_ head: HTTPHead, _ framing: HTTPFraming, _ clientFraming: ProxyRules.ClientFraming, keepAlive: Bool) {
        count(statusCode: head.status)
        var bytes = worker.headBuffer()
        ProxyRules.writeClientHead(head, framing: framing, clientFraming: clientFraming, keepAlive: keepAlive, into: &bytes)
        socket.write(bytes)
        worker.written(bytes)
    }

    /// What the machine cannot know by itself: whether the daemon stops, and whether a reload
    /// took the peer's access away (TENANT-3).
    func mayKeepConnection() -> Bool {
        !proxy.shuttingDown.load(ordering: .relaxed) && stillAllowed()
    }

    private func count(statusCode: Int) {
        proxy.board.requests.add(1, ordering: .relaxed)
        proxy.requestCounters[min(max(statusCode / 100, 1), 5) - 1].increment()
    }

    func armStallTimer(_ exchange: ProxyExchange) {
        stall.move(in: exchange.route.upstreamTimeoutNanoseconds)
    }

    func stopStallTimer() {
        stall.move(to: UInt64?.none)
    }

    /// The answer is complete (the machine has moved on): the next request, or the connection's end.
    func finish(_ ending: Ending) {
        if let (connection, pool) = ending.upstream { release(connection, pool: pool) }
        ending.request?.end()
        guard isOpen else { return }
        guard ending.keepAlive else { return closeCleanly() }
        responseFinished(partialRequestPending: (received?.readableBytes ?? 0) > 0)
        process()
    }

    /// The connection cannot go on (part of an answer went out, or the request's body is broken
    /// after part of it went upstream; the machine is closed): both sides close. `reset`: the
    /// answer was cut short by the upstream, which the client learns by a reset (on TCP; a Unix
    /// socket has none), never by a clean end it could take for the answer's; otherwise cleanly,
    /// as every close the connection asks for: what is queued goes out, then FIN.
    func closeClient(_ exchange: ProxyExchange, reset: Bool = false) {
        stopStallTimer()
        exchange.end()
        guard reset else { return closeCleanly() }
        socket.flush()
        socket.abort()
        ended()
    }
}
