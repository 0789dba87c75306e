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
    // MARK: /v1/events

    /// Server-Sent Events: the current token and lifecycle first, then every change; of the
    /// provider asked for, or without a selector of every provider the peer may use (MULTI-3).
    func events(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let entries: [ProviderEntry]
        let (providers, peer) = (api.providers, connection.peer)
        // Decided per event: a provider a reload adds is seen by the streams its lists allow, and
        // one whose lists no longer allow the peer is not (TENANT-3).
        let allowed: @Sendable (String) -> Bool = { name in providers.named(name)?.allows(peer) == true }
        // The listener's own lists too: a reload that takes the peer off the socket's lists ends
        // its streams, with or without a selector.
        let listenerAllows: @Sendable () -> Bool = { [api] in peer.map(api.settings.policy.allows) ?? false }
        let wants: @Sendable (String) -> Bool
        let stillAllowed: @Sendable () -> Bool
        if query["provider"] != nil || query["domain"] != nil {
            guard let entry = provider(for: query, context, endpoint: "/v1/events") else { return }
            entries = [entry]
            wants = { [name = entry.name] in $0 == name && allowed(name) }
            stillAllowed = { [name = entry.name] in listenerAllows() && allowed(name) }
        } else {
            entries = providers.visibleProviders(to: peer)
            wants = allowed
            stillAllowed = listenerAllows
        }
        let version = HTTPVersion(major: 1, minor: head.version.minor == 0 ? 0 : 1)
        context.writeAndFlush(wrapOutboundOut(.head(HTTPReply.eventStreamHead(version: version))), promise: nil)
        api.metrics.countRequests(endpoint: "/v1/events", status: 200)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        // Subscribe before reading the current state: a change in between is sent twice, never lost.
        let id = api.events.subscribe(
            .init(
                eventLoop: context.eventLoop, gate: api.loopGate, wants: wants, stillAllowed: stillAllowed,
                send: { frame in bound.value.handler.sendFrame(frame, bound.value.context) },
                finish: { bound.value.handler.finishStream(bound.value.context) }))
        streamStarted(id: id, context)
        for entry in entries {
            if let cached = entry.token(for: peer) {
                let event = EventBroadcaster.TokenEvent(cached.token, origin: .fetched, provider: entry.name)
                sendFrame(ByteBuffer(string: EventBroadcaster.frame("token", event)), context)
            }
            entry.provider.status { [gate = api.loopGate, name = entry.name] status in
                let frame = ByteBuffer(string: EventBroadcaster.frame("lifecycle", LifecycleBody(status.lifecycle, provider: name)))
                gate.execute(on: bound.eventLoop) { bound.value.handler.sendFrame(frame, bound.value.context) }
            }
        }
    }

    func sendFrame(_ frame: ByteBuffer, _ context: ChannelHandlerContext) {
        guard isStreaming, context.channel.isActive else { return }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(frame))), promise: nil)
    }
}
