import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFJSON
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
    // MARK: /v1/status, /v1/providers, /v1/lifecycle

    /// The provider asked for; without a selector also every provider the peer may use (MULTI-3).
    func status(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let selected = query["provider"] != nil || query["domain"] != nil
        let chosen: ProviderEntry?
        if selected {
            guard let entry = provider(for: query, context, endpoint: "/v1/status") else { return }
            chosen = entry
        } else {
            chosen = api.providers.implicit.flatMap { $0.allows(connection.peer) ? $0 : nil }
        }
        let listed = selected ? [] : api.providers.visibleProviders(to: connection.peer)
        let reply = answerLater(context, endpoint: "/v1/status")
        let api = self.api
        let asked = listed + (chosen.map { chosen in listed.contains { $0 === chosen } ? [] : [chosen] } ?? [])
        ProviderStatuses.gather(asked) { statuses in
            let body = StatusBody(
                chosen: chosen.flatMap { entry in statuses[entry.name].map { ProviderStatusBody(entry, $0, api: api) } },
                providers: selected ? nil : listed.compactMap { entry in statuses[entry.name].map { ProviderStatusBody(entry, $0) } },
                api: api)
            reply(.json(.ok, body))
        }
    }

    /// The providers the peer may use: identity, token freshness and refresh state, never a token.
    func providersList(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let listed = api.providers.visibleProviders(to: connection.peer)
        let reply = answerLater(context, endpoint: "/v1/providers")
        ProviderStatuses.gather(listed) { statuses in
            reply(.json(.ok, ["providers": listed.compactMap { entry in statuses[entry.name].map { ProviderStatusBody(entry, $0) } }]))
        }
    }

    /// Every provider moves: one app, one lifecycle.
    func lifecycle(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        // A bare word, a JSON string, or {"state": "…"}.
        var text = String(buffer: requestBody).filter { !$0.isWhitespace }.lowercased()
        if text.hasPrefix("{"), let state = JSONValue.parse(Array(text.utf8))?["state"]?.string { text = state }
        text = text.trimmingQuotes
        guard let state = WAFLifecycleState(rawValue: text) else {
            return respond(context, DaemonError.badLifecycle.reply, endpoint: "/v1/lifecycle")
        }
        let entries = api.providers.all
        // It moves every tenant's provider: a peer allowed for them all, or named in
        // lifecycle.allowedUsers/allowedGroups, and nobody else (TENANT-5).
        guard entries.allSatisfy({ $0.allows(connection.peer) }) || api.lifecycleAccess?.allows(connection.peer) == true else {
            return respond(context, DaemonError.lifecycleForbidden.reply, endpoint: "/v1/lifecycle", close: true)
        }
        let reply = answerLater(context, endpoint: "/v1/lifecycle")
        api.logger.info("lifecycle set over the socket", metadata: ["state": "\(state.rawValue)", "uid": "\(connection.peer?.uid ?? .max)"])
        let answers = Countdown(entries.count) { lifecycle in reply(.json(.ok, ["lifecycle": LifecycleBody(lifecycle)])) }
        for entry in entries { entry.provider.updateLifecycle({ _ in state }) { answers.arrived($0) } }
    }

    // MARK: /healthz, /readyz, /metrics

    /// 200 while every provider's state queue answers (the core loop), within 2 s.
    func health(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let reply = answerLater(
            context, endpoint: "/healthz", timeout: .seconds(2),
            onTimeout: DaemonError.unresponsive.reply)
        let entries = api.providers.all
        let answers = Countdown<Void>(entries.count) { _ in reply(.json(.ok, ["status": "ok"])) }
        for entry in entries { entry.provider.ping { answers.arrived(()) } }
    }

    /// The provider asked for has a fresh token; without a selector, every provider has one.
    func ready(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let entries: [ProviderEntry]
        if query["provider"] != nil || query["domain"] != nil {
            guard let entry = provider(for: query, context, endpoint: "/readyz") else { return }
            entries = [entry]
        } else {
            entries = api.providers.all
        }
        // No fresh token, or a token the canary found the web ACL no longer accepts.
        let unready = entries.filter { entry in
            (entry.provider.configuration.backgroundRefreshEnabled && entry.currentToken?.stale != false) || entry.canary.holdsReadiness
        }
        // Only the providers this peer may use are named (TENANT-7).
        let named = unready.filter { api.role == .probes || $0.allows(connection.peer) }.map(\.name)
        let response: HTTPReply =
            unready.isEmpty
            ? .json(.ok, ["ready": true])
            : DaemonError.notReady(named: entries.count > 1 ? named : []).reply
        respond(context, response, endpoint: "/readyz")
    }

    func metrics(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let reply = answerLater(context, endpoint: "/metrics")
        let metrics = api.metrics
        let entries = api.providers.all
        ProviderStatuses.gather(entries) { statuses in
            reply(
                HTTPReply(
                    status: .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                    body: metrics.exposition(statuses: entries.compactMap { entry in statuses[entry.name].map { (entry.name, $0) } })))
        }
    }
}

extension String {
    fileprivate var trimmingQuotes: String {
        hasPrefix("\"") && hasSuffix("\"") && count >= 2 ? String(dropFirst().dropLast()) : self
    }
}
