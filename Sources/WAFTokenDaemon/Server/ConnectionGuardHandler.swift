import NIOCore
import NIOHTTP1
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The first handler of every connection.
///
/// It reads the peer's credentials (`SO_PEERCRED`) before anything is answered, keeps the idle and
/// request timeouts, and answers the hot request, a plain `GET /v1/token`, from pre-encoded bytes
/// without the HTTP codec. The first request it does not answer switches the connection to the
/// NIOHTTP1 pipeline behind it for good, so pipelining and framing stay the codec's business.
final class ConnectionGuardHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A request head larger than this is refused with 431.
    static let maximumHeadBytes = 16 * 1024

    private enum Mode {
        case fast
        case codec
    }

    private enum Phase {
        /// Between requests: the idle timeout runs.
        case idle
        /// Part of a request arrived: the request timeout runs.
        case receiving
        /// A request is being answered (or streamed): no timeout.
        case serving
    }

    private let api: APIContext
    private let connection: ConnectionState
    private var mode = Mode.fast
    private var phase = Phase.idle
    private var pending: ByteBuffer?
    private var timer: Scheduled<Void>?
    private var cache = TokenResponseCache()
    /// Fast-path answers since the last flush to the metrics: with a token (200), without (503).
    private var servedSinceFlush = (withToken: 0, without: 0)
    private var closeWhenIdle = false

    init(api: APIContext, connection: ConnectionState) {
        self.api = api
        self.connection = connection
    }

    // MARK: Lifecycle

    func channelActive(context: ChannelHandlerContext) {
        armTimer(context)
        readPeerCredentials(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        flushCounts()
        context.fireChannelInactive()
    }

    private func readPeerCredentials(_ context: ChannelHandlerContext) {
        guard let socket = context.channel as? any SocketOptionProvider else {
            peerChecked(nil, context)
            return
        }
        let credentials: EventLoopFuture<SocketPeerCredentials> = socket.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SocketPeerCredentials.option))
        credentials.assumeIsolated().whenComplete { result in
            self.peerChecked(try? result.get(), context)
        }
    }

    private func peerChecked(_ credentials: SocketPeerCredentials?, _ context: ChannelHandlerContext) {
        // Fail closed: without credentials nobody is let in.
        if let credentials {
            let peer = PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
            connection.peer = peer
            connection.allowed = api.settings.policy.allows(peer)
        } else {
            connection.peer = PeerCredentials(pid: -1, uid: .max, gid: .max)
            connection.allowed = false
        }
        if !connection.allowed {
            api.logger.notice(
                "connection refused by the socket's access policy",
                metadata: ["uid": "\(connection.peer!.uid)", "gid": "\(connection.peer!.gid)", "pid": "\(connection.peer!.pid)"])
            mode = .codec
        }
        process(context)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if phase == .idle {
            phase = .receiving
            armTimer(context)
        }
        if connection.peer == nil || mode == .fast {
            if pending == nil {
                pending = bytes
            } else {
                pending!.writeBuffer(&bytes)
            }
            process(context)
        } else {
            context.fireChannelRead(data)
        }
    }

    private func process(_ context: ChannelHandlerContext) {
        guard connection.peer != nil else { return }
        guard mode == .fast else {
            if let held = pending {
                pending = nil
                context.fireChannelRead(wrapInboundOut(held))
            }
            return
        }
        var answered = false
        while var buffer = pending, buffer.readableBytes > 0 {
            let decision: (length: Int, plainText: Bool?)? = buffer.withUnsafeReadableBytes { bytes in
                guard let length = HotRequest.headLength(in: bytes) else { return nil }
                return (length, HotRequest.prefersPlainText(UnsafeRawBufferPointer(rebasing: bytes[0..<length])))
            }
            guard let decision else {
                if buffer.readableBytes > Self.maximumHeadBytes {
                    reject(.requestHeaderFieldsTooLarge, "requestHeaderFieldsTooLarge", "the request head exceeds \(Self.maximumHeadBytes) bytes", context)
                }
                break
            }
            let second = Int(time(nil))
            let generation = api.generation.load(ordering: .relaxed)
            if cache.refresh(api: api, second: second, generation: generation, allocator: context.channel.allocator) {
                flushCounts()
            }
            guard let plainText = decision.plainText, cache.answersFromCache, !closeWhenIdle else {
                switchToCodec(context)
                return
            }
            buffer.moveReaderIndex(forwardBy: decision.length)
            pending = buffer.readableBytes > 0 ? buffer : nil
            context.write(wrapOutboundOut(plainText ? cache.plainText : cache.json), promise: nil)
            if cache.status == 200 { servedSinceFlush.withToken += 1 } else { servedSinceFlush.without += 1 }
            answered = true
        }
        if answered {
            context.flush()
            phase = pending == nil ? .idle : .receiving
            armTimer(context)
        }
    }

    private func switchToCodec(_ context: ChannelHandlerContext) {
        mode = .codec
        if let held = pending {
            pending = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    // MARK: Outbound: what the API handler reports

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? ConnectionEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .requestStarted:
            phase = .serving
            timer?.cancel()
            timer = nil
        case .responseFinished:
            phase = .idle
            if closeWhenIdle {
                context.close(promise: nil)
            } else {
                armTimer(context)
            }
        }
        promise?.succeed(())
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ServerShutdownEvent {
            // Graceful stop: finish what is being answered, then close.
            closeWhenIdle = true
            if phase != .serving { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Timeouts

    private func armTimer(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let settings = api.settings
        switch phase {
        case .serving:
            timer = nil
        case .idle:
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: settings.idleTimeout) {
                context.close(promise: nil)
            }
        case .receiving:
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: settings.requestTimeout) {
                self.reject(.requestTimeout, "requestTimeout", "the request did not arrive in time", context)
            }
        }
    }

    /// Answers an error below the codec (nothing else is being answered then) and closes.
    private func reject(_ status: HTTPResponseStatus, _ code: String, _ message: String, _ context: ChannelHandlerContext) {
        timer?.cancel()
        pending = nil
        mode = .codec
        phase = .serving
        let response = APIResponse.error(status, code, message)
        let bytes = response.encoded(keepAlive: false, date: HTTPDate.format(.now), allocator: context.channel.allocator)
        api.metrics.countRequests(endpoint: "-", status: status.code)
        context.writeAndFlush(wrapOutboundOut(bytes)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    private func flushCounts() {
        for (status, count) in [(UInt(200), servedSinceFlush.withToken), (503, servedSinceFlush.without)] where count > 0 {
            api.metrics.countRequests(endpoint: "/v1/token", status: status, by: count)
            api.requestsServed.add(count, ordering: .relaxed)
        }
        servedSinceFlush = (0, 0)
    }
}

/// Sent through every connection's pipeline when the daemon stops.
struct ServerShutdownEvent: Sendable {}

/// Linux's `struct ucred`, which glibc only declares under `_GNU_SOURCE`, so Swift cannot see it;
/// `getsockopt(SO_PEERCRED)` fills this identical layout.
struct SocketPeerCredentials: Sendable {
    /// `SO_PEERCRED` on every Linux architecture but a few (mips, parisc, sparc, powerpc).
    static let option: Int32 = 17
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
