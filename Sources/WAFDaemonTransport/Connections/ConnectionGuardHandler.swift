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
        /// Between requests: the idle timeout runs (after a stop began, the drain window).
        case idle
        /// Part of a request arrived: the request timeout runs.
        case receiving
        /// A request is being answered (or streamed): no timeout.
        case serving
        /// Closing cleanly: our side has said its last (FIN); what the peer still sends is read
        /// and dropped until it closes too or the linger time passes.
        case lingering
    }

    /// How long a clean close waits for the peer to close its side.
    static let linger = TimeAmount.seconds(1)

    private let owner: any ConnectionGuardContext
    private let connection: ConnectionState
    private let peer: PeerCredentialsSource
    private var phase = Phase.idle
    private var held: ByteBuffer?
    /// The idle or the request timeout, whichever the phase runs.
    private let timeout = MovingTimeout()
    /// After a stop began (nil before), until when a kept-alive connection between requests may
    /// still send one; once it began, a connection closes when its answer is done.
    private var drainUntil: NIODeadline?
    /// Whom the listener's limits counted this connection for, and in which bucket.
    private var admitted: (peer: ListenerLimits.Peer, allowed: Bool)?

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
        if let admitted { owner.limits.release(admitted.peer, allowed: admitted.allowed) }
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
        // Fail closed: without credentials nobody is let in, now or on any later request.
        let known = credentials.map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
        // Peers on the network (`metrics.listen`) are one uid each by their address, not all one.
        let key: ListenerLimits.Peer? =
            if known?.uid == PeerCredentialsSource.networkUID, let address = context.channel.remoteAddress?.ipAddress {
                .address(address)
            } else {
                nil
            }
        guard let admitted = owner.limits.admit(known, as: key, for: owner) else {
            // Closed at once (TENANT-6).
            held = nil
            closeCleanly(context)
            return
        }
        self.admitted = admitted
        connection.identified(as: known, allowed: admitted.allowed)
        // The idle time was armed before anyone knew whether the peer is let in.
        if phase == .idle { armTimer(context) }
        if let held {
            self.held = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Read and dropped: unread, it would turn the close into a reset the client cannot tell
        // from a request that failed midway.
        if phase == .lingering { return }
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
        if let stop = event as? ServerShutdownEvent {
            // Graceful stop: what is under way is answered, then closed; a connection between
            // requests gets the drain window for its next one.
            drainUntil = min(context.eventLoop.now + stop.drainWindow, stop.deadline)
            if phase == .idle { armTimer(context) }
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
            if drainUntil != nil && !partial {
                closeCleanly(context)
                promise?.succeed(())
                return
            }
        }
        armTimer(context)
        promise?.succeed(())
    }

    // MARK: Closing cleanly

    /// Every close of a live connection that the connection's own handlers ask for (an answer with
    /// `Connection: close`, a refusal, the idle timeout, the drain window's end) goes out as a
    /// clean close: the pending bytes, then FIN; what the peer sends meanwhile is read and
    /// dropped; then the close. Closed with unread bytes, the kernel would send a reset instead: a
    /// client whose request crossed the close could not tell it was never read. Those closes pass
    /// no promise; a close whose caller waits for it (the listener's last, at the stop's deadline)
    /// is immediate, as is a second one.
    private func closeCleanly(_ context: ChannelHandlerContext) {
        close(context: context, mode: .all, promise: nil)
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, promise == nil, phase != .lingering, context.channel.isActive else {
            return context.close(mode: mode, promise: promise)
        }
        phase = .lingering
        held = nil
        context.close(mode: .output).assumeIsolated().whenComplete { result in
            switch result {
            case .success: self.armTimer(context)
            case .failure: context.close(mode: .all, promise: nil)  // no half-close here: a plain close
            }
        }
    }

    // MARK: Timeouts

    private func armTimer(_ context: ChannelHandlerContext) {
        // A late answer on a closed connection arms nothing: a timer would keep it alive.
        guard context.channel.isActive else { return timeout.cancel() }
        let settings = owner.connectionSettings
        let end: NIODeadline? =
            switch phase {
            case .serving: nil
            // A refused peer has the request timeout to ask for its 403, not the idle timeout.
            case .idle: drainUntil ?? context.eventLoop.now + (connection.allowed ? settings.idleTimeout : settings.requestTimeout)
            case .receiving: context.eventLoop.now + settings.requestTimeout
            case .lingering: context.eventLoop.now + Self.linger
            }
        timeout.move(to: end, on: context.eventLoop, expired: { self.timedOut(context) })
    }

    private func timedOut(_ context: ChannelHandlerContext) {
        switch phase {
        case .idle: closeCleanly(context)
        case .receiving: reject(.timedOut, context)
        case .serving: break
        case .lingering: context.close(mode: .all, promise: nil)
        }
    }

    /// Answers an error in front of everything else (nothing is being answered then) and closes.
    private func reject(_ refusal: DaemonError, _ context: ChannelHandlerContext) {
        timeout.cancel()
        held = nil
        phase = .serving
        let reply = refusal.reply
        let bytes = reply.encoded(keepAlive: false, allocator: context.channel.allocator)
        owner.requestCounting.countRequests(endpoint: "-", status: reply.status.code)
        context.writeAndFlush(wrapOutboundOut(bytes)).assumeIsolated().whenComplete { _ in self.closeCleanly(context) }
    }
}
