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
        let (reply, latency, counted) = service.reply(to: request)
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
        case .send(let status, let fields, let body):
            var headers = HTTPHeaders(fields)
            headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
            if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            if !body.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            }
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // One broken connection (a TLS failure, a reset) must not concern any other.
        context.close(promise: nil)
    }
}
