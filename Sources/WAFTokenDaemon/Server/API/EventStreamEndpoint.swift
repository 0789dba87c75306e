import NIOCore
import NIOHTTP1
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
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
            eventLoop: context.eventLoop, gate: api.loopGate,
            send: { frame in bound.value.handler.sendFrame(frame, bound.value.context) },
            finish: { bound.value.handler.finishStream(bound.value.context) }))
        if let cached = api.provider.cachedToken() {
            sendFrame(ByteBuffer(string: EventBroadcaster.frame("token", EventBroadcaster.TokenEvent(cached.token, origin: .fetched))), context)
        }
        api.provider.status { [gate = api.loopGate] status in
            let frame = ByteBuffer(string: EventBroadcaster.frame("lifecycle", LifecycleBody(status.lifecycle)))
            gate.execute(on: bound.eventLoop) { bound.value.handler.sendFrame(frame, bound.value.context) }
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
        context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: false), promise: nil)
    }
}
