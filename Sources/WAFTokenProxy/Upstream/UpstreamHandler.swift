import NIOCore
import WAFDaemonTransport
import WAFHTTPWire

/// What an upstream connection reports to the proxied request that uses it, on their shared event
/// loop.
protocol UpstreamDelegate: AnyObject {
    func upstream(_ part: UpstreamHandler.Part)
    func upstreamReadComplete()
    func upstreamWritabilityChanged(writable: Bool)
    /// The connection closed (or its answer could not be read) before its answer ended.
    func upstreamClosed()
    /// False while the client cannot take more: the upstream is not read meanwhile.
    var wantsUpstreamReads: Bool { get }
}

/// The last handler of an upstream connection, on raw bytes: it writes the request the proxy
/// built, reads the answer's head (`HTTPHeadParser`) and follows its body's framing to its end
/// (`HTTPFraming`), handing both on as they arrive, the body in the bytes it came in (or, for a
/// client that cannot read chunks, their data only).
final class UpstreamHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    typealias Part = AnswerReader.Part

    weak var delegate: (any UpstreamDelegate)?
    /// The route generation this connection was made for.
    let generation: Int
    /// Closes the connection when it waits in its pool too long.
    let idle = MovingTimeout()
    /// False once the connection cannot carry another request (its answer ran to the close, said
    /// `Connection: close`, or came with more than its framing).
    var reusable: Bool { reader.reusable && !broken }
    private var broken = false
    private var context: ChannelHandlerContext?
    private var readPending = false
    private let reader = AnswerReader()

    init(generation: Int) {
        self.generation = generation
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// A request went out: read its answer (to a HEAD: no body; for a client that cannot read
    /// chunks: their data).
    func expectAnswer(toHead: Bool, decodeChunks: Bool) {
        reader.expectAnswer(toHead: toHead, decodeChunks: decodeChunks)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        guard delegate != nil, !reader.isIdle else {
            // Bytes nobody asked for: this connection is in no state to be reused.
            broken = true
            context.close(promise: nil)
            return
        }
        do {
            // The delegate as it is at each part: a part it was told may have let the connection go.
            try reader.read(bytes) { part in
                guard let delegate else { return false }
                delegate.upstream(part)
                return delegate === self.delegate
            }
        } catch {
            broken = true
            delegate?.upstreamClosed()
            delegate = nil
            context.close(promise: nil)
        }
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
        // The close is the end of an answer framed by it; any other's cut short.
        if !reader.closed({ part in
            delegate?.upstream(part)
            return true
        }) {
            delegate?.upstreamClosed()
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure: this connection is done; its request learns it from channelInactive.
        broken = true
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

    func send(_ bytes: ByteBuffer) {
        context?.write(wrapOutboundOut(bytes), promise: nil)
    }

    func flush() {
        context?.flush()
    }
}
