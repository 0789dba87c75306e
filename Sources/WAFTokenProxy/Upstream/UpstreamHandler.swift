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

    enum Part {
        case head(HTTPHead, HTTPFraming)
        /// Body bytes as the client gets them.
        case body(ByteBuffer)
        case end
    }

    private enum Reading {
        /// Between answers: bytes here mean the connection cannot be reused.
        case idle
        case head(toHead: Bool, decodeChunks: Bool)
        case length(Int)
        case chunked(ChunkedScanner, decode: Bool)
        case untilClose
    }

    static let maximumHeadBytes = 64 * 1024

    weak var delegate: (any UpstreamDelegate)?
    /// The route generation this connection was made for.
    let generation: Int
    /// Closes the connection when it waits in its pool too long.
    let idle = MovingTimeout()
    /// False once the connection cannot carry another request (its answer ran to the close, said
    /// `Connection: close`, or came with more than its framing).
    private(set) var reusable = true
    private var context: ChannelHandlerContext?
    private var readPending = false
    private var reading = Reading.idle
    private var buffered: ByteBuffer?

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
        reading = .head(toHead: toHead, decodeChunks: decodeChunks)
        buffered = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard delegate != nil, !isIdle else {
            // Bytes nobody asked for: this connection is in no state to be reused.
            reusable = false
            context.close(promise: nil)
            return
        }
        if var held = buffered {
            held.writeBuffer(&bytes)
            bytes = held
            buffered = nil
        }
        do {
            try consume(&bytes)
        } catch {
            reusable = false
            delegate?.upstreamClosed()
            delegate = nil
            context.close(promise: nil)
        }
    }

    private var isIdle: Bool {
        if case .idle = reading { return true }
        return false
    }

    private func consume(_ bytes: inout ByteBuffer) throws(HTTPHeadParser.Failure) {
        while bytes.readableBytes > 0, let delegate {
            switch reading {
            case .idle:
                return
            case .head(let toHead, let decodeChunks):
                guard
                    let end = try bytes.withUnsafeReadableBytes({ raw throws(HTTPHeadParser.Failure) in
                        try HTTPHeadParser.headEnd(raw, limit: Self.maximumHeadBytes)
                    })
                else {
                    buffered = bytes
                    return
                }
                let head = try HTTPHeadParser.response(bytes.readSlice(length: end)!)
                if head.status < 200 {
                    // 100 Continue and other interim answers: the proxy sent the whole request, so
                    // they say nothing the client needs; 101 cannot happen, upgrades are refused.
                    guard head.status != 101 else { throw .malformed("the upstream switched protocols") }
                    continue
                }
                let framing = try HTTPFraming.response(head, toHead: toHead)
                if head.lists("connection", "close") || framing == .untilClose { reusable = false }
                delegate.upstream(.head(head, framing))
                switch framing {
                case .none, .length(0): finish(extra: bytes.readableBytes > 0)
                case .length(let length): reading = .length(length)
                case .chunked: reading = .chunked(ChunkedScanner(), decode: decodeChunks)
                case .untilClose: reading = .untilClose
                }
            case .length(let left):
                let slice = bytes.readSlice(length: min(left, bytes.readableBytes))!
                reading = .length(left - slice.readableBytes)
                delegate.upstream(.body(slice))
                if left == slice.readableBytes { finish(extra: bytes.readableBytes > 0) }
            case .chunked(var scanner, let decode):
                let start = bytes.readerIndex
                let used = try bytes.withUnsafeReadableBytes { raw throws(HTTPHeadParser.Failure) in
                    try scanner.scan(raw) { range in
                        // The delegate as it is now: a part it was told may have let the connection go.
                        if decode { self.delegate?.upstream(.body(bytes.getSlice(at: start + range.lowerBound, length: range.count)!)) }
                    }
                }
                let slice = bytes.readSlice(length: used)!
                if !decode { delegate.upstream(.body(slice)) }
                reading = .chunked(scanner, decode: decode)
                if scanner.isDone { finish(extra: bytes.readableBytes > 0) }
            case .untilClose:
                delegate.upstream(.body(bytes))
                bytes.moveReaderIndex(to: bytes.writerIndex)
            }
        }
    }

    /// The answer ended; with `extra` bytes after it, which no request asked for.
    private func finish(extra: Bool = false) {
        reading = .idle
        if extra { reusable = false }
        delegate?.upstream(.end)
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
        reusable = false
        if case .untilClose = reading {
            // The close is this answer's end.
            finish()
        } else {
            delegate?.upstreamClosed()
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure: this connection is done; its request learns it from channelInactive.
        reusable = false
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
