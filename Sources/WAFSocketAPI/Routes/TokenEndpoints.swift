import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
    // MARK: /v1/token, /v1/refresh

    /// `getToken()`; with `?wait=`, `onTokenReady()` (README, waf-tokenctl); of the provider the
    /// query names (MULTI-2).
    func token(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let plainText = AcceptNegotiation.prefersPlainText(Self.accept(head))
        guard let provider = provider(for: query, context, head, endpoint: "/v1/token")?.provider else { return }
        if let text = query["wait"] {
            guard let wait = Self.seconds(text) else { return respond(context, head, Self.badWait(text), endpoint: "/v1/token") }
            let reply = answerLater(context, head, endpoint: "/v1/token", timeout: wait, onTimeout: Self.timedOut(text))
            provider.onTokenReady { token, error in reply(Self.answer(token, error, plainText: plainText, provider: provider)) }
            return
        }
        if provider.configuration.backgroundRefreshEnabled {
            // TOK-1: the cached token, stale or not (TOK-5), without any I/O.
            let response = provider.cachedToken().map { Self.tokenResponse($0, plainText: plainText) } ?? TokenResponseCache.noToken
            return respond(context, head, response, endpoint: "/v1/token")
        }
        // TOK-2: a new token fetched now; RET-4: after the retries, the previous token or none.
        let reply = answerLater(context, head, endpoint: "/v1/token")
        provider.getToken { token in
            reply(token.map { Self.tokenResponse(Self.aged($0, provider: provider), plainText: plainText) } ?? TokenResponseCache.noToken)
        }
    }

    /// "This token was refused, get a new one" (RET-8), answered like `?wait=` (default 30 s).
    func refresh(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let text = query["wait"] ?? String(Int(Self.defaultRefreshWait))
        guard let wait = Self.seconds(text) else { return respond(context, head, Self.badWait(text), endpoint: "/v1/refresh") }
        let plainText = AcceptNegotiation.prefersPlainText(Self.accept(head))
        guard let provider = provider(for: query, context, head, endpoint: "/v1/refresh")?.provider else { return }
        let reply = answerLater(context, head, endpoint: "/v1/refresh", timeout: wait, onTimeout: Self.timedOut(text))
        provider.refreshToken { token, error in reply(Self.answer(token, error, plainText: plainText, provider: provider)) }
    }

    static func answer(_ token: WAFToken?, _ error: SdkError?, plainText: Bool, provider: WAFTokenProvider) -> HTTPReply {
        if let token { return tokenResponse(aged(token, provider: provider), plainText: plainText) }
        let error = error ?? .unexpected(WAFProviderShutDownError())
        return .error(.serviceUnavailable, error.name, error.description, headers: [("Retry-After", "1")])
    }

    static func tokenResponse(_ cached: (token: WAFToken, age: Duration, stale: Bool), plainText: Bool) -> HTTPReply {
        plainText ? .text(.ok, cached.token.value) : .json(.ok, TokenBody(cached))
    }

    /// Age and staleness of a token handed out by a callback: the cached one's if it is the same.
    static func aged(_ token: WAFToken, provider: WAFTokenProvider) -> (token: WAFToken, age: Duration, stale: Bool) {
        if let cached = provider.cachedToken(), cached.token == token { return cached }
        let age = Duration.seconds(max(0, Date.now.timeIntervalSince(token.fetchedAt)))
        return (token, age, age >= provider.configuration.tokenRefreshDelay)
    }

    static func timedOut(_ wait: String) -> HTTPReply {
        .error(.gatewayTimeout, "timeout", "no token within \(wait) s; the provider goes on trying")
    }

    static func badWait(_ text: String) -> HTTPReply {
        .error(
            .badRequest, "badRequest",
            "wait must be a number of seconds above 0 and at most \(Int(maximumWait)), not \(text.prefix(40).debugDescription)")
    }

    static func seconds(_ text: String) -> TimeAmount? {
        RequestTarget.seconds(text, maximum: maximumWait).map { .nanoseconds(Int64($0 * 1e9)) }
    }

    static func accept(_ head: HTTPRequestHead) -> String? {
        let values = head.headers["Accept"]
        return values.isEmpty ? nil : values.joined(separator: ",")
    }
}
