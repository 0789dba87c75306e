import NIOCore
import NIOHTTP1

/// One connection's requests: routes each, then answers, drops or stalls it.
final class LocalTokenServiceHandler: ChannelInboundHandler {
    typealias InboundIn = NIOHTTPServerRequestFull
    typealias OutboundOut = HTTPServerResponsePart

    private let service: LocalTokenService

    init(service: LocalTokenService) {
        self.service = service
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let request = unwrapInboundIn(data)
        let (reply, latency, counted) = service.reply(to: request, from: context.channel.remoteAddress?.ipAddress)
        let keepAlive = request.head.isKeepAlive
        if latency > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(latency))) {
                self.send(reply, keepAlive: keepAlive, context: context)
                if counted { self.service.callFinished() }
            }
        } else {
            send(reply, keepAlive: keepAlive, context: context)
            if counted { service.callFinished() }
        }
    }

    private func send(_ reply: Reply, keepAlive: Bool, context: ChannelHandlerContext) {
        switch reply {
        case .drop:
            context.close(promise: nil)
        case .stall:
            break
        case .trickle(let status, let fields, let body, let interval):
            writeHead(status, fields, length: body.count, keepAlive: keepAlive, context: context)
            context.flush()
            trickle(body[...], every: interval, keepAlive: keepAlive, context: context)
        case .send(let status, let fields, let body):
            writeHead(status, fields, length: body.count, keepAlive: keepAlive, context: context)
            if !body.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            }
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            }
        }
    }

    private func writeHead(_ status: HTTPResponseStatus, _ fields: [(String, String)], length: Int, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(fields)
        headers.replaceOrAdd(name: "Content-Length", value: String(length))
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
    }

    /// One byte of `rest` now, the next after `interval`, until the body is out or the peer left.
    private func trickle(_ rest: ArraySlice<UInt8>, every interval: TimeAmount, keepAlive: Bool, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        guard let byte = rest.first else {
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
            return
        }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: [byte])))), promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
            self.trickle(rest.dropFirst(), every: interval, keepAlive: keepAlive, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // One broken connection (a TLS failure, a reset) must not concern any other.
        context.close(promise: nil)
    }
}
