import NIOCore
import WAFDaemonTransport
import WAFProxyLoop

#if canImport(Glibc)
import Glibc
#endif

/// Where a connection is, for its guard's timeouts.
enum GuardPhase {
    /// Between requests: the idle timeout runs (after a stop began, the drain window).
    case idle
    /// Part of a request arrived: the request timeout runs.
    case receiving
    /// A request is being answered (or streamed): no timeout.
    case serving
    /// Closing cleanly: our side said its last (FIN) or is about to; what the peer still sends
    /// is read and dropped until it closes too or the linger time passes.
    case lingering
}

/// The connection's guard, as the socket API's `ConnectionGuardHandler` is for its own: who the
/// peer is (before any byte is read, so that nothing is answered to a peer not yet checked), how
/// many connections it holds, how long it may take, and a clean close.
extension ProxyConnection {
    /// How long a clean close waits for the peer to close its side.
    static let linger: UInt64 = 1_000_000_000

    /// Who the peer is and whether it may stay: called once, as the connection is accepted.
    func start() {
        // Fail closed: without credentials nobody is let in, now or on any later request.
        let known = worker.peers.credentials(of: socket.descriptor)
        // Closed at once when the listener's limits are full (TENANT-6).
        guard let counted = proxy.limits.admit(known, for: proxy) else { return closeCleanly() }
        admitted = counted
        connection.identified(as: known, allowed: counted.allowed)
        // The idle time, or a refused peer's request time, from now.
        enter(.idle)
    }

    /// The daemon stops: what is under way is answered, then closed; a connection between
    /// requests gets the drain window for its next one (docs/systemd.md).
    func stopBegan(deadline: UInt64) {
        drainUntil = min(EpollLoop.now + Self.drainWindow, deadline)
        if phase == .idle { enter(.idle) }
    }

    /// A kept-alive client under load sends its next request within milliseconds: it gets an
    /// answer instead of a close it must retry after.
    static let drainWindow = ServerShutdownEvent.defaultDrainWindow.loopNanoseconds

    /// A request head arrived: it is being served, no timeout applies.
    func requestStarted() {
        guard phase != .lingering else { return }
        enter(.serving)
    }

    /// The answer is complete; idle time starts (or, once a stop began, the connection closes),
    /// unless part of the next request is already there: then its request time starts.
    func responseFinished(partialRequestPending partial: Bool) {
        guard phase != .lingering else { return }
        enter(partial ? .receiving : .idle)
        if drainUntil != nil, !partial { closeCleanly() }
    }

    // MARK: Closing cleanly

    /// Every close the connection asks for (an answer with `Connection: close`, a refusal, the
    /// idle timeout, the drain window's end) is a clean one: the pending bytes, then FIN; what
    /// the peer sends meanwhile is read and dropped; then the close. Closed with unread bytes, the
    /// kernel would send a reset instead: a client whose request crossed the close could not tell
    /// it was never read.
    func closeCleanly() {
        guard isOpen, phase != .lingering else { return }
        enter(.lingering)
        received = nil
        // Nothing more goes to the client but what is queued: the request in progress ends here.
        if let exchange = machine.closed() {
            stall.cancel()
            exchange.end()
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
        deadline = EpollLoop.now + Self.linger
    }

    // MARK: Timeouts

    /// The connection moves to `new`, whose timeout ends a fixed time from now.
    func enter(_ new: GuardPhase) {
        phase = new
        // The serving phase, one per request, has no deadline: it reads neither the clock nor the
        // settings (a lock on the route in force).
        guard new != .serving else { return deadline = nil }
        let settings = proxy.connectionSettings
        let now = EpollLoop.now
        switch new {
        case .serving: deadline = nil
        // A refused peer has the request timeout to ask for its 403, not the idle timeout.
        case .idle: deadline = drainUntil ?? now + (connection.allowed ? settings.idleTimeout : settings.requestTimeout).loopNanoseconds
        case .receiving: deadline = now + settings.requestTimeout.loopNanoseconds
        // What is queued may take the idle time to go out; the FIN, the linger time.
        case .lingering: deadline = now + (socket.queuedBytes > 0 ? settings.idleTimeout.loopNanoseconds : Self.linger)
        }
    }

    /// The phase's timeout, set once at the end of each event (`settle`), not at each change of
    /// phase: a request that arrives whole goes from idle to receiving to serving in one read, and
    /// the request timeout, earlier than the idle one, would otherwise be scheduled and cancelled
    /// for every request.
    func armTimer() {
        timeout.move(to: isOpen ? deadline : nil)
    }

    func timedOut() {
        guard isOpen else { return }
        defer { settle() }
        switch phase {
        case .idle: closeCleanly()
        case .receiving: reject(.timedOut)
        case .serving: break
        case .lingering: ended()
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
