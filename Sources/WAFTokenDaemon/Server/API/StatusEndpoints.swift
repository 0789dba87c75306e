import NIOCore
import NIOHTTP1
import WAFChallenge
import WAFTokenCore
import WAFJSON

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
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
