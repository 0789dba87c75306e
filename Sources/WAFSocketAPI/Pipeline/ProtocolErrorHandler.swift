import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Answers a request the HTTP parser refused, then closes that connection (and only that one):
/// 431 for an oversized head, 505 for a version other than 1.x, 400 for anything else (a request
/// line ending in a bare LF too, which the parser reports as a bad version: `RequestLineTap`).
/// Like NIOHTTP1's `HTTPServerProtocolErrorHandler`, but with the statuses the contract asks for.
final class ProtocolErrorHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: any RequestCounting
    private let tap: RequestLineTap
    private var responseInProgress = false
    /// One answer per connection: the decoder may report the same error again as the connection
    /// closes (its last bytes decoded once more).
    private var answered = false

    init(metrics: any RequestCounting, tap: RequestLineTap) {
        self.metrics = metrics
        self.tap = tap
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            // Anything else wrong with one connection ends that connection.
            context.close(promise: nil)
            return
        }
        if !responseInProgress && !answered {
            answered = true
            let response = DaemonError(parserError, sawVersionWithBareLineFeed: tap.sawVersionWithBareLineFeed).reply
            context.write(wrapOutboundOut(.head(response.head(keepAlive: false))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
            metrics.countRequests(endpoint: "-", status: response.status.code)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        } else {
            context.close(promise: nil)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head: responseInProgress = true
        case .end: responseInProgress = false
        case .body: break
        }
        context.write(data, promise: promise)
    }
}
