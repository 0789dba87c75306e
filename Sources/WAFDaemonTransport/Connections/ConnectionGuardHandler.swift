import Logging
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// The first word on every connection: who is there (SO_PEERCRED, before any byte is passed on,
/// so that nothing is answered to a peer not yet checked), and how long it may take. Between
/// requests the idle timeout runs; while a request arrives, the request timeout (408).
package final class ConnectionGuardHandler: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private enum Phase {
        /// Between requests: the idle timeout runs.
        case idle
        /// Part of a request arrived: the request timeout runs.
        case receiving
        /// A request is being answered (or streamed): no timeout.
        case serving
    }

    private let owner: any ConnectionGuardContext
    private let connection: ConnectionState
    private let peer: PeerCredentialsSource
    private var phase = Phase.idle
    private var held: ByteBuffer?
    /// The idle or the request timeout, whichever the phase runs.
    private let timeout = MovingTimeout()
    private var closeWhenIdle = false
    /// The uid the listener's limits counted this connection for.
    private var admitted: UInt32?

    package init(owner: any ConnectionGuardContext, connection: ConnectionState, peer: PeerCredentialsSource) {
        self.owner = owner
        self.connection = connection
        self.peer = peer
    }

    package func channelActive(context: ChannelHandlerContext) {
        armTimer(context)
        readPeerCredentials(context)
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        timeout.cancel()
        if let uid = admitted { owner.limits.release(uid: uid) }
        admitted = nil
        context.fireChannelInactive()
    }

    // MARK: The peer

    private func readPeerCredentials(_ context: ChannelHandlerContext) {
        guard let credentials = peer.read(context.channel) else {
            peerChecked(nil, context)
            return
        }
        credentials.assumeIsolated().whenComplete { result in
            self.peerChecked(try? result.get(), context)
        }
    }

    private func peerChecked(_ credentials: SocketPeerCredentials?, _ context: ChannelHandlerContext) {
        // Fail closed: without credentials nobody is let in.
        let peer = credentials.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) } ?? PeerCredentials(pid: -1, uid: .max, gid: .max)
        let settings = owner.connectionSettings
        let metadata: Logger.Metadata = ["listener": "\(owner.listenerName)", "uid": "\(peer.uid)", "gid": "\(peer.gid)", "pid": "\(peer.pid)"]
        switch owner.limits.admit(uid: peer.uid, settings: settings) {
        case .admitted:
            admitted = peer.uid
        case let full:
            // Closed at once: a peer that holds thousands of connections gets no more (TENANT-6).
            let limit =
                full == .listenerFull
                ? "socket.maxConnections (\(settings.maxConnections))" : "socket.maxConnectionsPerUser (\(settings.maxConnectionsPerUser))"
            owner.limits.log("full", uid: peer.uid, level: .warning, "connection closed: \(limit) reached", metadata: metadata, logger: owner.logger)
            held = nil
            context.close(promise: nil)
            return
        }
        connection.peer = peer
        connection.decide(credentials != nil && settings.policy.allows(peer))
        if !connection.allowed {
            owner.limits.log(
                "refused", uid: peer.uid, level: .notice, "connection refused by the \(owner.listenerName)'s access policy", metadata: metadata,
                logger: owner.logger)
        }
        if let held {
            self.held = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if phase == .idle {
            phase = .receiving
            armTimer(context)
        }
        guard connection.peer == nil else {
            context.fireChannelRead(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        if held == nil { held = bytes } else { held!.writeBuffer(&bytes) }
        if held!.readableBytes > HTTPLimits.maximumHeadBytes { reject(.headTooLarge, context) }
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ServerShutdownEvent {
            // Graceful stop: finish what is being answered, then close.
            closeWhenIdle = true
            if phase != .serving { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound: what the handlers behind report

    package func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? ConnectionEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .requestStarted:
            phase = .serving
        case .responseFinished(let partial):
            phase = partial ? .receiving : .idle
            if closeWhenIdle && !partial {
                context.close(promise: nil)
                promise?.succeed(())
                return
            }
        }
        armTimer(context)
        promise?.succeed(())
    }

    // MARK: Timeouts

    private func armTimer(_ context: ChannelHandlerContext) {
        // A late answer on a closed connection arms nothing: a timer would keep it alive.
        guard context.channel.isActive else { return timeout.cancel() }
        let settings = owner.connectionSettings
        let end: NIODeadline? =
            switch phase {
            case .serving: nil
            case .idle: context.eventLoop.now + settings.idleTimeout
            case .receiving: context.eventLoop.now + settings.requestTimeout
            }
        timeout.move(to: end, on: context.eventLoop) { self.timedOut(context) }
    }

    private func timedOut(_ context: ChannelHandlerContext) {
        switch phase {
        case .idle: context.close(promise: nil)
        case .receiving: reject(.timedOut, context)
        case .serving: break
        }
    }

    /// Answers an error in front of everything else (nothing is being answered then) and closes.
    private func reject(_ refusal: HTTPRefusal, _ context: ChannelHandlerContext) {
        timeout.cancel()
        held = nil
        phase = .serving
        let reply = refusal.reply
        let bytes = reply.encoded(keepAlive: false, allocator: context.channel.allocator)
        owner.requestCounting.countRequests(endpoint: "-", status: reply.status.code)
        context.writeAndFlush(wrapOutboundOut(bytes)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
