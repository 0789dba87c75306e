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

extension APIHandler {
    // MARK: /v1/token, /v1/refresh

    /// `getToken()`; with `?wait=`, `onTokenReady()` (docs/clients.md); of the provider the
    /// query names (MULTI-2).
    func token(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let plainText = AcceptNegotiation.prefersPlainText(Self.accept(head))
        guard let entry = provider(for: query, context, endpoint: "/v1/token") else { return }
        let (provider, peer) = (entry.provider, connection.peer)
        if let text = query["wait"] {
            guard let wait = Self.seconds(text) else { return respond(context, Self.badWait(text), endpoint: "/v1/token") }
            let reply = answerLater(
                context, endpoint: "/v1/token", timeout: wait, onTimeout: Self.timedOut(text),
                atStop: { entry.token(for: peer).map { Self.tokenResponse($0, plainText: plainText) } ?? APIHandler.stopping })
            pendingWait = provider.onTokenReady { token, error in reply(Self.answer(token, error, plainText: plainText, entry: entry, peer: peer)) }
            return
        }
        if provider.configuration.backgroundRefreshEnabled {
            // TOK-1: the cached token, stale or not (TOK-5), without any I/O.
            let response = entry.token(for: peer).map { Self.tokenResponse($0, plainText: plainText) } ?? TokenResponseCache.noToken
            return respond(context, response, endpoint: "/v1/token")
        }
        // TOK-2: a new token fetched now; RET-4: after the retries, the previous token or none.
        let reply = answerLater(context, endpoint: "/v1/token")
        provider.getToken { token in
            reply(token == nil ? TokenResponseCache.noToken : Self.answer(token, nil, plainText: plainText, entry: entry, peer: peer))
        }
    }

    /// "This token was refused, get a new one" (RET-8), answered like `?wait=` (default 30 s). A
    /// forced fetch at most once per `refresh.minForcedIntervalSec` (TENANT-4): inside it, what
    /// that fetch answered (its token, or its failure with Retry-After for the rest of the interval).
    func refresh(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let text = query["wait"] ?? String(Int(Self.defaultRefreshWait))
        guard let wait = Self.seconds(text) else { return respond(context, Self.badWait(text), endpoint: "/v1/refresh") }
        let plainText = AcceptNegotiation.prefersPlainText(Self.accept(head))
        guard let entry = provider(for: query, context, endpoint: "/v1/refresh") else { return }
        let peer = connection.peer
        let reply = answerLater(
            context, endpoint: "/v1/refresh", timeout: wait, onTimeout: Self.timedOut(text),
            atStop: { entry.token(for: peer).map { Self.tokenResponse($0, plainText: plainText) } ?? APIHandler.stopping })
        let answer: WAFTokenResultCallback = { token, error in reply(Self.answer(token, error, plainText: plainText, entry: entry, peer: peer)) }
        let (decision, forced) = entry.forcedRefresh.request(entry.provider, answer)
        pendingWait = forced
        guard case .limited(let failure, let retryAfter) = decision else { return }
        // A forced fetch ran less than the interval ago. It failed: the same failure, until the
        // interval ends (never the old token as if refreshed). It succeeded: its token (or a newer
        // one), else the provider's next.
        if let failure {
            let seconds = max(1, retryAfter.components.seconds + (retryAfter.components.attoseconds > 0 ? 1 : 0))
            return reply(DaemonError.fetchFailed(name: failure.name, description: failure.description, retryAfter: Int(seconds)).reply)
        }
        if let cached = entry.token(for: peer) { return reply(Self.tokenResponse(cached, plainText: plainText)) }
        pendingWait = entry.provider.onTokenReady(answer)
    }

    /// The answer to a request that waited for the provider: the token only if `peer` may have it
    /// now and it is the one the entry's identity holds (a reload may have switched it meanwhile,
    /// TENANT-2); a newer one of that identity if it came since.
    static func answer(_ token: WAFToken?, _ error: SdkError?, plainText: Bool, entry: ProviderEntry, peer: PeerCredentials?) -> HTTPReply {
        if token != nil {
            if let cached = entry.token(for: peer) { return tokenResponse(cached, plainText: plainText) }
            if !entry.allows(peer) { return HTTPReply(.forbidden(named: nil)) }
            return DaemonError.identityChanged.reply
        }
        let error = error ?? .unexpected(WAFProviderShutDownError())
        return DaemonError.fetchFailed(name: error.name, description: error.description, retryAfter: 1).reply
    }

    static func tokenResponse(_ cached: (token: WAFToken, age: Duration, stale: Bool), plainText: Bool) -> HTTPReply {
        plainText ? .text(.ok, cached.token.value) : .json(.ok, TokenBody(cached))
    }

    static func timedOut(_ wait: String) -> HTTPReply {
        DaemonError.waitTimedOut(wait: wait).reply
    }

    static func badWait(_ text: String) -> HTTPReply {
        DaemonError.badWait(text, maximum: Int(maximumWait)).reply
    }

    static func seconds(_ text: String) -> TimeAmount? {
        RequestTarget.seconds(text, maximum: maximumWait).map { .nanoseconds(Int64($0 * 1e9)) }
    }

    static func accept(_ head: HTTPRequestHead) -> String? {
        let values = head.headers["Accept"]
        return values.isEmpty ? nil : values.joined(separator: ",")
    }
}
