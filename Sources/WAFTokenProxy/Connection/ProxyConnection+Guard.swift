import NIOCore
import WAFDaemonTransport
import WAFProxyLoop

#if canImport(Glibc)
import Glibc
#endif

/// The connection's guard: who the peer is (before any byte is read, so that nothing is answered
/// to a peer not yet checked), how many connections it holds, how long it may take, and a clean
/// close. The decisions are the `ConnectionGuard`'s, as the socket API's connections' are; this
/// performs them on the loop.
extension ProxyConnection {
    /// Where the connection is, for its guard's timeouts.
    var phase: ConnectionGuard.Phase { guardian.phase }

    /// Who the peer is and whether it may stay: called once, as the connection is accepted.
    func start() {
        admit(worker.peers.credentials(of: socket.descriptor))
    }

    /// `known`: the peer's credentials (nil: the kernel could not say, and nobody is let in).
    func admit(_ known: PeerCredentials?) {
        let now = loop.time
        let settings = route.connection
        guardian.accepted(now: now, settings: settings)
        // Counted by the listener's limits; over them, closed at once (TENANT-6).
        let admission = proxy.limits.admit(known, for: proxy)
        if let admission { connection.identified(as: known, allowed: admission.allowed) }
        perform(guardian.admitted(admission, now: now, settings: settings))
    }

    /// The daemon stops: what is under way is answered, then closed; a connection between
    /// requests gets the drain window for its next one (docs/systemd.md).
    func stopBegan(deadline: UInt64) {
        guardian.stopBegan(now: loop.time, deadline: deadline, settings: route.connection)
    }

    /// A request head arrived: it is being served, no timeout applies. (The serving phase, one per
    /// request, reads neither the clock nor the settings, a lock on the route in force.)
    func requestStarted() {
        guardian.requestStarted()
    }

    /// The answer is complete; idle time starts (or, once a stop began, the connection closes),
    /// unless part of the next request is already there: then its request time starts.
    func responseFinished(partialRequestPending partial: Bool) {
        perform(guardian.responseFinished(partial: partial, now: loop.time, settings: route.connection))
    }

    /// Bytes from the client: false when they are dropped (the connection is closing).
    func bytesArrived() -> Bool {
        // Most reads come in the middle of a request: no clock, no settings then.
        guard phase == .idle || phase == .lingering else { return true }
        return guardian.bytesArrived(now: loop.time, settings: route.connection)
    }

    // MARK: Closing cleanly

    /// Every close the connection asks for (an answer with `Connection: close`, a refusal, the
    /// idle timeout, the drain window's end) is a clean one: the pending bytes, then FIN; what
    /// the peer sends meanwhile is read and dropped; then the close. Closed with unread bytes, the
    /// kernel would send a reset instead: a client whose request crossed the close could not tell
    /// it was never read.
    func closeCleanly() {
        guard isOpen, guardian.closing(now: loop.time, queued: socket.queuedBytes > 0, settings: route.connection) else { return }
        received = nil
        // Nothing more goes to the client but what is queued: the request in progress ends here.
        if let closing = machine.closed() {
            stall.cancel()
            closing.upstream?.close()
            closing.request.end()
        }
        socket.flush()
        guard isOpen else { return }
        socket.reading = true
        guard socket.queuedBytes == 0 else { return }
        shutDownOutput()
    }

    /// Everything queued went out: FIN, then the linger time.
    func shutDownOutput() {
        guard isOpen else { return }
        guard shutdown(socket.descriptor, Int32(SHUT_WR)) == 0 else { return ended() }
        guardian.outputClosed(now: loop.time)
    }

    // MARK: Timeouts

    /// The phase's timeout, set once at the end of each event (`settle`), not at each change of
    /// phase: a request that arrives whole goes from idle to receiving to serving in one read, and
    /// the request timeout, earlier than the idle one, would otherwise be scheduled and cancelled
    /// for every request.
    func armTimer() {
        timeout.move(to: isOpen ? guardian.deadline : nil)
    }

    func timedOut() {
        guard isOpen else { return }
        defer { settle() }
        perform(guardian.expired())
    }

    private func perform(_ action: ConnectionGuard.Action) {
        switch action {
        case .none: break
        case .closeCleanly: closeCleanly()
        case .reject(let error): reject(error)
        case .close: ended()
        }
    }

    /// Answers an error in front of everything else (nothing is being answered then) and closes.
    func reject(_ refusal: DaemonError) {
        received = nil
        let reply = refusal.reply
        proxy.requestCounting.countRequests(endpoint: "-", status: reply.status.code)
        socket.write(reply.encoded(keepAlive: false, allocator: ByteBufferAllocator()))
        closeCleanly()
    }
}
