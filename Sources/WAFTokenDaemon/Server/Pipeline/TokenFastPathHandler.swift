import NIOCore
import NIOHTTP1
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// Answers the hot request, a plain `GET /v1/token` (`PlainTokenRequest`), from pre-encoded bytes
/// without the HTTP codec; pipelined ones are answered in one write. The first request it does not
/// answer switches the connection to the NIOHTTP1 pipeline behind it for good, so framing and
/// pipelining stay the codec's business. It answers only while the connection can write: a client
/// that pipelines without reading gets no more than the socket buffers hold.
final class TokenFastPathHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let api: APIContext
    private let connection: ConnectionState
    private var codec = false
    private var pending: ByteBuffer?
    private var cache = TokenResponseCache()
    /// Answers since the last flush to the metrics: with a token (200), without (503).
    private var servedSinceFlush = (withToken: 0, without: 0)
    private var stopping = false

    init(api: APIContext, connection: ConnectionState) {
        self.api = api
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !codec else { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if pending == nil { pending = bytes } else { pending!.writeBuffer(&bytes) }
        answer(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, !codec, pending != nil { answer(context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        flushCounts()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ServerShutdownEvent { stopping = true }
        context.fireUserInboundEventTriggered(event)
    }

    /// Answers every complete plain request pending while the connection can write.
    private func answer(_ context: ChannelHandlerContext) {
        guard connection.allowed else { return switchToCodec(context) }
        var answered = false
        while var buffer = pending, buffer.readableBytes > 0, context.channel.isWritable {
            let decision: (length: Int, plainText: Bool?)?? = buffer.withUnsafeReadableBytes { bytes in
                guard let length = PlainTokenRequest.headLength(in: bytes, limit: SocketPipeline.maximumHeadBytes) else {
                    // A line ending in a bare LF never completes a head here: the codec refuses it (400).
                    return PlainTokenRequest.hasBareLineFeed(bytes) ? .some(nil) : nil
                }
                return (length, PlainTokenRequest.prefersPlainText(UnsafeRawBufferPointer(rebasing: bytes[0..<length])))
            }
            guard let decision else {
                if buffer.readableBytes > SocketPipeline.maximumHeadBytes { return switchToCodec(context) }  // the codec refuses it: 431
                break
            }
            guard let decision else { return switchToCodec(context) }
            if cache.refresh(api: api, second: Int(time(nil)), generation: api.generation.current, allocator: context.channel.allocator) {
                flushCounts()
            }
            guard let plainText = decision.plainText, cache.answersFromCache, !stopping else { return switchToCodec(context) }
            buffer.moveReaderIndex(forwardBy: decision.length)
            pending = buffer.readableBytes > 0 ? buffer : nil
            context.write(wrapOutboundOut(plainText ? cache.plainText : cache.json), promise: nil)
            if cache.status == 200 { servedSinceFlush.withToken += 1 } else { servedSinceFlush.without += 1 }
            answered = true
        }
        if answered {
            context.flush()
            context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: pending != nil), promise: nil)
        }
    }

    private func switchToCodec(_ context: ChannelHandlerContext) {
        codec = true
        if let held = pending {
            pending = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    private func flushCounts() {
        for (status, count) in [(UInt(200), servedSinceFlush.withToken), (503, servedSinceFlush.without)] where count > 0 {
            api.metrics.countRequests(endpoint: "/v1/token", status: status, by: count)
            api.requestsServed.add(count, ordering: .relaxed)
        }
        servedSinceFlush = (0, 0)
    }
}
