import Logging
import NIOCore
import NIOHTTP1

/// The first word on every connection of the socket API: who is there (SO_PEERCRED, before any
/// byte is passed on, so that nothing is answered to a peer not yet checked), and how long it may
/// take. The decisions are the `ConnectionGuard`'s, as the proxy's connections' are: this handler
/// performs them on NIO's pipeline.
package final class ConnectionGuardHandler: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private let owner: any ConnectionGuardContext
    private let connection: ConnectionState
    private let peer: PeerCredentialsSource
    private var guardian = ConnectionGuard()
    /// Bytes that arrived before the peer was checked.
    private var held: ByteBuffer?
    /// The phase's timeout, at the guard's deadline.
    private let timeout = MovingTimeout()

    package init(owner: any ConnectionGuardContext, connection: ConnectionState, peer: PeerCredentialsSource) {
        self.owner = owner
        self.connection = connection
        self.peer = peer
    }

    package func channelActive(context: ChannelHandlerContext) {
        guardian.accepted(now: Self.now(context), settings: owner.connectionSettings)
        armTimer(context)
        readPeerCredentials(context)
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        timeout.cancel()
        if let admitted = guardian.ended() { owner.limits.release(admitted.peer, allowed: admitted.allowed) }
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
        let admission = owner.limits.admit(known, as: key, for: owner)
        if let admission { connection.identified(as: known, allowed: admission.allowed) }
        perform(guardian.admitted(admission, now: Self.now(context), settings: owner.connectionSettings), context)
        guard admission != nil, let held else { return }
        self.held = nil
        context.fireChannelRead(wrapInboundOut(held))
    }

    // MARK: Inbound

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Read and dropped while lingering: unread, it would turn the close into a reset the
        // client cannot tell from a request that failed midway.
        guard guardian.bytesArrived(now: Self.now(context), settings: owner.connectionSettings) else { return }
        armTimer(context)
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
            guardian.stopBegan(now: Self.now(context), deadline: stop.deadline.uptimeNanoseconds, settings: owner.connectionSettings)
            armTimer(context)
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
            guardian.requestStarted()
        case .responseFinished(let partial):
            perform(guardian.responseFinished(partial: partial, now: Self.now(context), settings: owner.connectionSettings), context)
        }
        armTimer(context)
        promise?.succeed(())
    }

    // MARK: Performing the guard's decisions

    private func perform(_ action: ConnectionGuard.Action, _ context: ChannelHandlerContext) {
        switch action {
        case .none: armTimer(context)
        case .closeCleanly: closeCleanly(context)
        case .reject(let error): reject(error, context)
        case .close:
            held = nil
            timeout.cancel()
            context.close(mode: .all, promise: nil)
        }
    }

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
        guard mode == .all, promise == nil, context.channel.isActive,
            guardian.closing(now: Self.now(context), queued: true, settings: owner.connectionSettings)
        else {
            return context.close(mode: mode, promise: promise)
        }
        held = nil
        armTimer(context)
        context.close(mode: .output).assumeIsolated().whenComplete { result in
            switch result {
            case .success:
                self.guardian.outputClosed(now: Self.now(context))
                self.armTimer(context)
            case .failure: context.close(mode: .all, promise: nil)  // no half-close here: a plain close
            }
        }
    }

    private func armTimer(_ context: ChannelHandlerContext) {
        // A late answer on a closed connection arms nothing: a timer would keep it alive.
        guard context.channel.isActive else { return timeout.cancel() }
        timeout.move(to: guardian.deadline.map { NIODeadline.uptimeNanoseconds($0) }, on: context.eventLoop, expired: { self.timedOut(context) })
    }

    private func timedOut(_ context: ChannelHandlerContext) {
        perform(guardian.expired(), context)
    }

    /// Answers an error in front of everything else (nothing is being answered then) and closes.
    private func reject(_ refusal: DaemonError, _ context: ChannelHandlerContext) {
        timeout.cancel()
        held = nil
        guardian.requestStarted()
        let reply = refusal.reply
        let bytes = reply.encoded(keepAlive: false, allocator: context.channel.allocator)
        owner.requestCounting.countRequests(endpoint: "-", status: reply.status.code)
        context.writeAndFlush(wrapOutboundOut(bytes)).assumeIsolated().whenComplete { _ in self.closeCleanly(context) }
    }

    private static func now(_ context: ChannelHandlerContext) -> UInt64 {
        context.eventLoop.now.uptimeNanoseconds
    }
}
