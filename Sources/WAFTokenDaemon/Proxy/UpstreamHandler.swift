import NIOCore
import NIOHTTP1

/// What an upstream connection reports to the proxied request that uses it, on their shared event
/// loop.
protocol UpstreamDelegate: AnyObject {
    func upstream(_ part: HTTPClientResponsePart)
    func upstreamReadComplete()
    func upstreamWritabilityChanged(writable: Bool)
    func upstreamClosed()
    /// False while the client cannot take more: the upstream is not read meanwhile.
    var wantsUpstreamReads: Bool { get }
}

/// The last handler of an upstream connection: hands answers to the request using the connection
/// (its delegate), and reads only as fast as that request's client takes them.
final class UpstreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    weak var delegate: (any UpstreamDelegate)?
    /// The route generation this connection was made for.
    let generation: Int
    /// Closes the connection when it waits in its pool too long.
    let idle = MovingTimeout()
    private var context: ChannelHandlerContext?
    private var readPending = false

    init(generation: Int) {
        self.generation = generation
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let delegate else {
            // Bytes on an idle pooled connection: it is not in a state we can reuse.
            context.close(promise: nil)
            return
        }
        delegate.upstream(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        delegate?.upstreamReadComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        delegate?.upstreamWritabilityChanged(writable: context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idle.cancel()
        delegate?.upstreamClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure, a malformed answer: this connection is done; its request learns
        // it from channelInactive.
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if let delegate, !delegate.wantsUpstreamReads {
            readPending = true
        } else {
            context.read()
        }
    }

    /// The client can take more again.
    func resumeReads() {
        guard readPending, let context else { return }
        readPending = false
        context.read()
    }

    func send(_ part: HTTPClientRequestPart) {
        context?.write(wrapOutboundOut(part), promise: nil)
    }

    func flush() {
        context?.flush()
    }
}
