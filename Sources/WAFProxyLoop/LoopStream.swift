import Glibc
import NIOCore

/// What a `LoopStream` tells its owner, on the loop's thread.
public protocol LoopStreamDelegate: AnyObject {
    /// Plaintext from the peer. The stream reads only while `reading`.
    func received(_ plaintext: ByteBuffer, on stream: LoopStream)
    /// Everything written went to the kernel, after a write found its buffer full.
    func drained(_ stream: LoopStream)
    /// The stream is closed: the peer closed (`reason` nil), or the connection, its TLS or its
    /// connect timeout failed (`reason` says which).
    func closed(_ stream: LoopStream, reason: String?)
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
    public private(set) var socket: LoopSocket
    private var tls: TLSClientSession?
    private let tlsSetup: UpstreamTLS?
    /// Addresses still to try should the connect be refused.
    private var untried: [SocketAddress] = []
    /// What was written before the TCP connection was made, for another address (nil after).
    private var beforeConnect: [ByteBuffer]? = []
    private unowned let loop: EpollLoop
    /// Held until the stream closes (as `LoopSocket`'s: no side table for the owner).
    public var delegate: (any LoopStreamDelegate)?
    private var connectTimer: EpollLoop.Timer?
    private var plaintext = ByteBuffer()
    public private(set) var isOpen = true
    /// The TCP connection was made (a failure after it is not one of reaching the peer).
    public private(set) var tcpConnected = false
    /// The connect (or its handshake) took longer than its timeout.
    public private(set) var timedOut = false

    /// Connects to `address`; with `tls`, verifies the server as `serverName` (and resumes the
    /// context's last session for it). `timeout` bounds the connect and the handshake.
    public convenience init(
        to address: SocketAddress, tls: UpstreamTLS?, timeout: UInt64, on loop: EpollLoop
    ) throws(LoopError) {
        try self.init(to: [address], tls: tls, timeout: timeout, on: loop)
    }

    /// Connects to the first of `addresses` that takes the connection, in order (the system's
    /// order of preference, for a name). `timeout` bounds every attempt and the handshake together.
    public init(
        to addresses: [SocketAddress], tls: UpstreamTLS?, timeout: UInt64, on loop: EpollLoop
    ) throws(LoopError) {
        var remaining = addresses[...]
        var opened: (LoopSocket, TLSClientSession?)?
        var failure = LoopError.system("connect", EDESTADDRREQ)
        // An address the system refuses at once (no route, no IPv6) hands over to the next too.
        while opened == nil, let next = remaining.popFirst() {
            do throws(LoopError) {
                opened = try Self.open(next, tls: tls, on: loop)
            } catch {
                failure = error
            }
        }
        guard let opened else { throw failure }
        (socket, self.tls) = opened
        tlsSetup = tls
        untried = Array(remaining)
        self.loop = loop
        socket.delegate = self
        connectTimer = loop.schedule(in: timeout) { [weak self] in
            self?.timedOut = true
            self?.fail("the connection was not up within \(timeout / 1_000_000) ms")
        }
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
        tls = nil
        tlsSetup = nil
        beforeConnect = nil
        self.loop = loop
        tcpConnected = true
        socket.delegate = self
    }

    /// Whether the stream reads (its owner stops it while the other side cannot take more).
    public var reading: Bool {
        get { socket.reading }
        set { socket.reading = newValue }
    }

    /// Bytes written and not yet taken by the kernel: queued ciphertext, and for TLS the plaintext
    /// that waits for the handshake (which an owner following this for backpressure must count,
    /// or a client could send it without bound while the handshake stalls).
    public var queuedBytes: Int { socket.queuedBytes + (tls?.waitingBytes ?? 0) }

    /// Queues plaintext for the next `flush`.
    public func write(_ bytes: ByteBuffer) {
        guard isOpen else { return }
        if !untried.isEmpty { beforeConnect?.append(bytes) }
        guard let tls else { return socket.write(bytes) }
        tls.write(bytes)
        if let ciphertext = tls.takeCiphertext() { socket.write(ciphertext) }
    }

    /// Sends what was written; a TLS session that failed on it closes the stream (the delegate
    /// hears it now).
    public func flush() {
        if case .failed(let why)? = tls?.status { return fail("TLS: \(why)") }
        socket.flush()
    }

    /// Closes at once; the delegate hears nothing more.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let connectTimer { loop.cancel(connectTimer) }
        socket.close()
        delegate = nil
    }

    private var up: Bool { tls?.handshakeDone ?? true }

    public func connected(_ socket: LoopSocket) {
        tcpConnected = true
        beforeConnect = nil
        untried = []
        guard tls == nil else { return }
        stopConnectTimer()
    }

    public func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        guard let tls else { return delegate?.received(bytes, on: self) ?? () }
        let wasUp = up
        tls.receive(bytes)
        tls.read(into: &plaintext)
        // TLS's verdict first: a send that fails would close the stream with an errno instead.
        if case .failed(let why) = tls.status { return fail("TLS: \(why)") }
        if let ciphertext = tls.takeCiphertext() { socket.send(ciphertext) }
        guard isOpen else { return }
        if !wasUp, up {
            stopConnectTimer()
            // What waited for the handshake went out with it: the owner may write more.
            delegate?.drained(self)
            guard isOpen else { return }
        }
        if plaintext.readableBytes > 0 {
            let delivered = plaintext
            plaintext.clear()
            delegate?.received(delivered, on: self)
        }
        if isOpen, tls.status == .closed { fail(nil) }
    }

    public func drained(_ socket: LoopSocket) {
        delegate?.drained(self)
    }

    public func closed(_ socket: LoopSocket, error: Int32?) {
        if !tcpConnected, !untried.isEmpty, let written = beforeConnect, tryNext(written) { return }
        fail(error.map { String(cString: strerror($0)) })
    }

    /// The connect was refused: the next address, with what was written so far. False when none
    /// can be tried.
    private func tryNext(_ written: [ByteBuffer]) -> Bool {
        while !untried.isEmpty {
            let next = untried.removeFirst()
            guard let (socket, tls) = try? Self.open(next, tls: tlsSetup, on: loop) else { continue }
            // The owner's backpressure carries over to the new socket.
            socket.reading = self.socket.reading
            self.socket = socket
            self.tls = tls
            socket.delegate = self
            beforeConnect = []
            for bytes in written { write(bytes) }
            return true
        }
        return false
    }

    private func stopConnectTimer() {
        if let connectTimer { loop.cancel(connectTimer) }
        connectTimer = nil
    }

    private func fail(_ reason: String?) {
        guard isOpen else { return }
        let delegate = self.delegate
        close()
        delegate?.closed(self, reason: reason)
    }
}
