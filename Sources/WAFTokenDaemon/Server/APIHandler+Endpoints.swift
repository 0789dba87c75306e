import NIOCore
import NIOHTTP1
import WAFChallenge
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
    // MARK: /v1/token, /v1/refresh

    /// `getToken()`; with `?wait=`, `onTokenReady()` (SIDECAR.md).
    func token(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let plainText = AcceptNegotiation.prefersPlainText(Self.accept(head))
        let provider = api.provider
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
        let provider = api.provider
        let reply = answerLater(context, head, endpoint: "/v1/refresh", timeout: wait, onTimeout: Self.timedOut(text))
        provider.refreshToken { token, error in reply(Self.answer(token, error, plainText: plainText, provider: provider)) }
    }

    static func answer(_ token: WAFToken?, _ error: SdkError?, plainText: Bool, provider: WAFTokenProvider) -> APIResponse {
        if let token { return tokenResponse(aged(token, provider: provider), plainText: plainText) }
        let error = error ?? .unexpected(WAFProviderShutDownError())
        return .error(.serviceUnavailable, error.name, error.description, headers: [("Retry-After", "1")])
    }

    static func tokenResponse(_ cached: (token: WAFToken, age: Duration, stale: Bool), plainText: Bool) -> APIResponse {
        plainText ? .text(.ok, cached.token.value) : .json(.ok, TokenBody(cached))
    }

    /// Age and staleness of a token handed out by a callback: the cached one's if it is the same.
    static func aged(_ token: WAFToken, provider: WAFTokenProvider) -> (token: WAFToken, age: Duration, stale: Bool) {
        if let cached = provider.cachedToken(), cached.token == token { return cached }
        let age = Duration.seconds(max(0, Date.now.timeIntervalSince(token.fetchedAt)))
        return (token, age, age >= provider.configuration.tokenRefreshDelay)
    }

    static func timedOut(_ wait: String) -> APIResponse {
        .error(.gatewayTimeout, "timeout", "no token within \(wait) s; the provider goes on trying")
    }

    static func badWait(_ text: String) -> APIResponse {
        .error(.badRequest, "badRequest", "wait must be a number of seconds above 0 and at most \(Int(maximumWait)), not \(text.prefix(40).debugDescription)")
    }

    static func seconds(_ text: String) -> TimeAmount? {
        guard let value = Double(text), value > 0, value <= maximumWait, value.isFinite else { return nil }
        return .nanoseconds(Int64(value * 1e9))
    }

    static func accept(_ head: HTTPRequestHead) -> String? {
        let values = head.headers["Accept"]
        return values.isEmpty ? nil : values.joined(separator: ",")
    }

    // MARK: /v1/cookie

    func cookie(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let path = query["path"] ?? "/"
        func answer(_ response: APIResponse) { respond(context, head, response, endpoint: "/v1/cookie") }
        guard path.hasPrefix("/") else {
            return answer(.error(.badRequest, "badRequest", "path must start with /, not \(path.prefix(80).debugDescription)"))
        }
        let manager = api.provider.cookieManager
        let settings = manager.settings
        guard settings.setTokenCookie else {
            return answer(.error(.notFound, "noCookie", "the token cookie is off (setTokenCookie: false)"))
        }
        guard let cookie = manager.currentCookie else { return answer(TokenResponseCache.noToken) }
        guard cookie.applies(toPath: path) else {
            return answer(.error(.notFound, "noCookie", "no cookie applies to \(path.prefix(200)) (tokenCookiePath is \(settings.path))"))
        }
        if AcceptNegotiation.prefersJSON(Self.accept(head)) {
            answer(.json(.ok, CookieBody(cookie)))
        } else {
            answer(.text(.ok, cookie.headerValue))
        }
    }

    struct CookieBody: Encodable {
        let name = WAFCookie.name
        let value: String
        let header: String
        let domain: String
        let path: String
        let expires: String
        let secure: Bool
        let sameSite: String
        let setCookie: String

        init(_ cookie: WAFCookie) {
            value = cookie.value
            header = cookie.headerValue
            domain = cookie.domain
            path = cookie.path
            expires = APIResponse.timeStyle.format(cookie.expires)
            secure = cookie.secure
            sameSite = cookie.sameSite
            setCookie = cookie.setCookieHeaderValue
        }
    }

    // MARK: /v1/events

    /// Server-Sent Events: the current token and lifecycle first, then every change.
    func events(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let headers = HTTPHeaders([
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("Date", HTTPDate.format(.now)),
        ])
        let version = HTTPVersion(major: 1, minor: head.version.minor == 0 ? 0 : 1)
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .ok, headers: headers))), promise: nil)
        api.metrics.countRequests(endpoint: "/v1/events", status: 200)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        // Subscribe before reading the current state: a change in between is sent twice, never lost.
        stream = api.events.subscribe(.init(
            eventLoop: context.eventLoop,
            send: { frame in bound.value.handler.sendFrame(frame, bound.value.context) },
            finish: { bound.value.handler.finishStream(bound.value.context) }))
        if let cached = api.provider.cachedToken() {
            sendFrame(ByteBuffer(string: EventBroadcaster.frame("token", EventBroadcaster.TokenEvent(cached.token, origin: .fetched))), context)
        }
        api.provider.status { status in
            let frame = ByteBuffer(string: EventBroadcaster.frame("lifecycle", LifecycleBody(status.lifecycle)))
            bound.eventLoop.execute { bound.value.handler.sendFrame(frame, bound.value.context) }
        }
    }

    func sendFrame(_ frame: ByteBuffer, _ context: ChannelHandlerContext) {
        guard stream != nil, context.channel.isActive else { return }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(frame))), promise: nil)
    }

    func finishStream(_ context: ChannelHandlerContext) {
        guard let id = stream else { return }
        stream = nil
        api.events.unsubscribe(id)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        context.triggerUserOutboundEvent(ConnectionEvent.responseFinished, promise: nil)
    }

    // MARK: /v1/status, /v1/lifecycle

    func status(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let reply = answerLater(context, head, endpoint: "/v1/status")
        let api = self.api
        api.provider.status { status in reply(.json(.ok, StatusBody(status, api: api))) }
    }

    func lifecycle(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        // A bare word, a JSON string, or {"state": "…"}.
        var text = String(buffer: requestBody).filter { !$0.isWhitespace }.lowercased()
        if text.hasPrefix("{"), let state = JSONValue.parse(Array(text.utf8))?["state"]?.string { text = state }
        text = text.trimmingQuotes
        guard let state = WAFLifecycleState(rawValue: text) else {
            return respond(context, head, .error(.badRequest, "badRequest", "the body must be foreground, background or closed"), endpoint: "/v1/lifecycle")
        }
        let reply = answerLater(context, head, endpoint: "/v1/lifecycle")
        api.logger.info("lifecycle set over the socket", metadata: ["state": "\(state.rawValue)"])
        api.provider.updateLifecycle({ _ in state }) { lifecycle in reply(.json(.ok, ["lifecycle": LifecycleBody(lifecycle)])) }
    }

    // MARK: /healthz, /readyz, /metrics

    /// 200 while the provider's state queue answers (the core loop), within 2 s.
    func health(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let reply = answerLater(
            context, head, endpoint: "/healthz", timeout: .seconds(2),
            onTimeout: .error(.serviceUnavailable, "unresponsive", "the provider did not answer within 2 s"))
        api.provider.ping { reply(.json(.ok, ["status": "ok"])) }
    }

    func ready(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let provider = api.provider
        let response: APIResponse
        if !provider.configuration.backgroundRefreshEnabled {
            response = .json(.ok, ["ready": true])
        } else if let cached = provider.cachedToken(), !cached.stale {
            response = .json(.ok, ["ready": true])
        } else {
            response = .error(.serviceUnavailable, "notReady", "no fresh token is cached")
        }
        respond(context, head, response, endpoint: "/readyz")
    }

    func metrics(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let reply = answerLater(context, head, endpoint: "/metrics")
        let metrics = api.metrics
        api.provider.status { status in
            reply(APIResponse(
                status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                body: metrics.exposition(status: status)))
        }
    }
}

extension String {
    fileprivate var trimmingQuotes: String {
        hasPrefix("\"") && hasSuffix("\"") && count >= 2 ? String(dropFirst().dropLast()) : self
    }
}
