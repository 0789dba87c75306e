import Glibc
import NIOCore

/// What a `LoopStream` tells its owner, on the loop's thread.
public protocol LoopStreamDelegate: AnyObject {
    /// Plaintext from the peer. The stream reads only while `reading`.
    func received(_ plaintext: ByteBuffer, on stream: LoopStream)
    /// Everything written went to the kernel, after a write found its buffer full.
    func drained(_ stream: LoopStream)
    /// The stream is closed, and `end` says how.
    func closed(_ stream: LoopStream, end: LoopStream.End)
}

/// TLS to an upstream: the context its sessions share, and the name its certificate must carry.
public typealias UpstreamTLS = (context: TLSClientContext, serverName: String)

/// A connection to an upstream that carries plaintext whether the wire is plain or TLS: a
/// `LoopSocket` with, for https, a `TLSClientSession` between the two. What is written before the
/// connection (and its handshake) is up waits for it; a connect that takes longer than its
/// timeout fails. Given several addresses (a name's), a refused connect tries the next, with what
/// was written so far, within the same timeout. A stream is closed by its owner or by its peer:
/// its socket holds it (and it its delegate) until then.
public final class LoopStream: LoopSocketDelegate {
    /// What a connection holds in memory between its reads, for a budget to reserve (TENANT-12),
    /// measured by `StreamMemoryTests`: a plain one its objects (the kernel's buffers are not the
    /// process's); a TLS one OpenSSL's session once up (its state, the server's certificates, the
    /// BIO pair, and for TLS 1.3 the handshake's message buffer, which OpenSSL keeps for the
    /// messages after it: 40 KiB; 21 KiB with TLS 1.2), with a margin. Beyond it: a record's buffer
    /// while one arrives (`heldBeyond`), and plaintext waiting to go (`queuedBytes`).
    public static func reservation(tls: Bool) -> Int { tls ? 48 * 1024 : 2 * 1024 }

    /// What it holds now beyond `reservation` and `queuedBytes`.
    public var heldBeyond: Int { tls?.heldBeyond ?? 0 }

    public private(set) var socket: LoopSocket
    private var state: State
    private let tlsSetup: UpstreamTLS?
    private let tunnel: Tunnel?
    /// Through a tunnel: what the owner wrote before it was up, which waits for it.
    private var pending: [ByteBuffer] = []
    private var pendingBytes = 0
    private unowned let loop: EpollLoop
    /// Held until the stream closes (as `LoopSocket`'s: no side table for the owner).
    public var delegate: (any LoopStreamDelegate)?

    /// Connects to the first of `addresses` that takes the connection, in order (the system's
    /// order of preference, for a name). `timeout` bounds every attempt and the handshake together.
    public init(
        to addresses: [SocketAddress], tls: UpstreamTLS?, tunnel: Tunnel? = nil, timeout: UInt64, on loop: EpollLoop
    ) throws(LoopError) {
        var remaining = addresses[...]
        var opened: (LoopSocket, TLSClientSession?)?
        var failure = LoopError.system("connect", EDESTADDRREQ)
        // An address the system refuses at once (no route, no IPv6) hands over to the next too.
        // Through a tunnel, TLS begins once it is up.
        while opened == nil, let next = remaining.popFirst() {
            do throws(LoopError) {
                opened = try Self.open(next, tls: tunnel == nil ? tls : nil, on: loop)
            } catch {
                failure = error
            }
        }
        guard let (socket, session) = opened else { throw failure }
        self.socket = socket
        tlsSetup = tls
        self.tunnel = tunnel
        self.loop = loop
        // A placeholder for the moment the timer needs `self`: it is scheduled right below.
        state = .ended(.closed)
        // Unowned, not weak: a weak reference gives the stream a side table, through which every
        // retain and release of it then goes. The timer cannot outlive it: the socket holds the
        // stream until its end, and every way out of the states that carry the timer cancels it.
        let timer = loop.schedule(in: timeout) { [unowned self] in fail(.timedOut) }
        state = .connecting(tls: session, untried: Array(remaining), written: [], timer: timer)
        socket.delegate = self
    }

    /// A socket connecting to `address`, with a TLS session whose first flight is queued on it.
    private static func open(_ address: SocketAddress, tls: UpstreamTLS?, on loop: EpollLoop) throws(LoopError) -> (LoopSocket, TLSClientSession?) {
        let session = try tls.map { (context, name) throws(LoopError) in try TLSClientSession(context, serverName: name) }
        let socket = try LoopSocket.connect(to: address, on: loop)
        if let session {
            session.start()
            if let hello = session.takeCiphertext() { socket.write(hello) }
        }
        return (socket, session)
    }

    /// A plaintext stream over a connected socket (one end of a socketpair, in tests).
    public init(connected socket: LoopSocket, on loop: EpollLoop) {
        self.socket = socket
        tlsSetup = nil
        tunnel = nil
        self.loop = loop
        state = .up(nil)
        socket.delegate = self
    }

    public var isOpen: Bool {
        if case .ended = state { return false }
        return true
    }

    private var tls: TLSClientSession? {
        switch state {
        case .connecting(let tls, _, _, _): tls
        case .handshaking(let tls, _): tls
        case .up(let tls): tls
        case .tunnelling, .ended: nil
        }
    }

    /// Through a tunnel not up yet: what is written waits for it.
    private var waitsForTunnel: Bool {
        guard tunnel != nil else { return false }
        switch state {
        case .connecting, .tunnelling: return true
        case .handshaking, .up, .ended: return false
        }
    }

    /// Whether the stream reads (its owner stops it while the other side cannot take more).
    public var reading: Bool {
        get { socket.reading }
        set { socket.reading = newValue }
    }

    /// Bytes written and not yet taken by the kernel: queued ciphertext, and for TLS the plaintext
    /// that waits for the handshake (which an owner following this for backpressure must count,
    /// or a client could send it without bound while the handshake stalls).
    public var queuedBytes: Int { socket.queuedBytes + (tls?.waitingBytes ?? 0) + pendingBytes }

    /// Bytes the kernel took on the socket in use (TLS records included): a request of which none
    /// went may be sent again elsewhere (TENANT-15).
    public var bytesWritten: Int { socket.bytesWritten }

    /// Queues plaintext for the next `flush`.
    public func write(_ bytes: ByteBuffer) {
        if waitsForTunnel {
            pending.append(bytes)
            pendingBytes += bytes.readableBytes
            return
        }
        if case .connecting(let tls, let untried, var written, let timer) = state, !untried.isEmpty {
            written.append(bytes)
            state = .connecting(tls: tls, untried: untried, written: written, timer: timer)
        }
        guard isOpen else { return }
        guard let tls else { return socket.write(bytes) }
        tls.write(bytes)
        if let ciphertext = tls.takeCiphertext() { socket.write(ciphertext) }
    }

    /// Sends what was written; a TLS session that failed on it closes the stream (the delegate
    /// hears it now).
    public func flush() {
        if case .failed(let why)? = tls?.status { return fail(.failed("TLS: \(why)")) }
        socket.flush()
    }

    /// Closes at once; the delegate hears nothing more.
    public func close() {
        guard isOpen else { return }
        end(.closed)
        delegate = nil
    }

    // MARK: The socket's reports

    public func connected(_ socket: LoopSocket) {
        guard case .connecting(let tls, _, _, let timer) = state else { return }
        if let tunnel {
            state = .tunnelling(head: ByteBuffer(), timer: timer)
            socket.write(tunnel.request)
            return
        }
        if let tls {
            state = .handshaking(tls, timer: timer)
        } else {
            loop.cancel(timer)
            state = .up(nil)
        }
    }

    public func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        if case .tunnelling(var head, let timer) = state {
            var bytes = bytes
            head.writeBuffer(&bytes)
            return tunnelAnswered(head, timer)
        }
        guard let tls else { return delegate?.received(bytes, on: self) ?? () }
        tls.receive(bytes, scratch: &loop.scratch)
        // TLS's verdict first: a send that fails would close the stream with an errno instead.
        if case .failed(let why) = tls.status { return fail(.failed("TLS: \(why)")) }
        if let ciphertext = tls.takeCiphertext() { socket.send(ciphertext) }
        guard isOpen else { return }
        if case .handshaking(_, let timer) = state, tls.handshakeDone {
            loop.cancel(timer)
            state = .up(tls)
            // What waited for the handshake went out with it: the owner may write more.
            delegate?.drained(self)
            guard isOpen else { return }
        }
        if let plaintext = tls.read() { delegate?.received(plaintext, on: self) }
        if isOpen, tls.status == .closed { fail(.closed) }
    }

    public func drained(_ socket: LoopSocket) {
        delegate?.drained(self)
    }

    public func closed(_ socket: LoopSocket, error: Int32?) {
        let why = error.map { String(cString: strerror($0)) }
        switch state {
        case .connecting(_, let untried, let written, let timer):
            if tryNext(untried, written, timer) { return }
            fail(.unreachable(why ?? "the connection was refused"))
        case .tunnelling:
            fail(.unreachable(why ?? "the forward proxy closed the connection before answering CONNECT"))
        case .handshaking:
            fail(.failed(why ?? "the server closed the connection in the TLS handshake"))
        case .up:
            fail(why.map { .failed($0) } ?? .closed)
        case .ended:
            return
        }
    }

    /// The forward proxy's answer to `CONNECT` so far (`head`): a 2xx opens the tunnel (TLS with
    /// the upstream begins, what waited goes), anything else refuses it, with its status (EGRESS-3).
    private func tunnelAnswered(_ head: ByteBuffer, _ timer: EpollLoop.Timer) {
        let status: Int, end: Int
        switch Tunnel.answer(head) {
        case .incomplete:
            state = .tunnelling(head: head, timer: timer)
            return
        case .endless:
            return fail(.failed("the forward proxy's answer to CONNECT has no end"))
        case .status(let answered, let length):
            (status, end) = (answered, length)
        }
        guard (200..<300).contains(status) else { return fail(.refused(status)) }
        let rest = head.getSlice(at: head.readerIndex + end, length: head.readableBytes - end) ?? ByteBuffer()
        let waiting = pending
        pending.removeAll()
        pendingBytes = 0
        if let (context, name) = tlsSetup {
            let session: TLSClientSession
            do throws(LoopError) {
                session = try TLSClientSession(context, serverName: name)
            } catch {
                return fail(.failed("\(error)"))
            }
            session.start()
            state = .handshaking(session, timer: timer)
            for bytes in waiting { session.write(bytes) }
            if let hello = session.takeCiphertext() { socket.write(hello) }
            socket.flush()
            if isOpen, rest.readableBytes > 0 { received(rest, on: socket) }
            return
        }
        loop.cancel(timer)
        state = .up(nil)
        for bytes in waiting { socket.write(bytes) }
        socket.flush()
        guard isOpen else { return }
        delegate?.drained(self)
        if isOpen, rest.readableBytes > 0 { delegate?.received(rest, on: self) }
    }

    /// The connect was refused: the next address, with what was written so far. False when none
    /// can be tried.
    private func tryNext(_ untried: [SocketAddress], _ written: [ByteBuffer], _ timer: EpollLoop.Timer) -> Bool {
        var untried = untried[...]
        while let next = untried.popFirst() {
            guard let (socket, tls) = try? Self.open(next, tls: tunnel == nil ? tlsSetup : nil, on: loop) else { continue }
            // The owner's backpressure carries over to the new socket.
            socket.reading = self.socket.reading
            self.socket = socket
            state = .connecting(tls: tls, untried: Array(untried), written: [], timer: timer)
            socket.delegate = self
            for bytes in written { write(bytes) }
            return true
        }
        return false
    }

    private func end(_ end: End) {
        pending.removeAll()
        pendingBytes = 0
        switch state {
        case .connecting(_, _, _, let timer), .tunnelling(_, let timer), .handshaking(_, let timer): loop.cancel(timer)
        case .up, .ended: break
        }
        state = .ended(end)
        socket.close()
    }

    private func fail(_ end: End) {
        guard isOpen else { return }
        let delegate = self.delegate
        self.end(end)
        self.delegate = nil
        delegate?.closed(self, end: end)
    }
}
