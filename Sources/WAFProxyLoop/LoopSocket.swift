import CEpoll
import Glibc
import NIOCore

/// What a `LoopSocket` tells its owner, on the loop's thread.
public protocol LoopSocketDelegate: AnyObject {
    /// The connection is up (a socket that was connecting).
    func connected(_ socket: LoopSocket)
    /// Bytes arrived. The socket reads only while `reading`.
    func received(_ bytes: ByteBuffer, on socket: LoopSocket)
    /// Everything queued went out, after a `send` found the kernel's buffer full: the owner may
    /// read the other side again.
    func drained(_ socket: LoopSocket)
    /// The peer closed, or the connection failed (`error`, an errno). The socket is closed.
    func closed(_ socket: LoopSocket, error: Int32?)
}

/// A non-blocking stream socket on an `EpollLoop`: reads while its owner wants them, queues what
/// the kernel cannot take yet and writes it with `writev` when it can. Backpressure is the owner's
/// to follow: `queuedBytes` and `drained` on this side, `reading` on the other.
public final class LoopSocket: LoopHandler {
    public let descriptor: Int32
    private unowned let loop: EpollLoop
    /// Held until the socket closes: a weak reference would give the owner a side table, and every
    /// retain of it, many per request, the runtime's slow path. The close lets go of it.
    public var delegate: (any LoopSocketDelegate)?
    private var queue: [ByteBuffer] = []
    /// Bytes queued and not yet taken by the kernel.
    public private(set) var queuedBytes = 0
    /// Bytes the kernel took, since the socket was made: a request of which none went may be sent
    /// again on another connection (TENANT-15).
    public private(set) var bytesWritten = 0
    public private(set) var isOpen = true
    private var connecting: Bool
    private var interest: UInt32
    /// The peer hung up while the socket was not reading: what it sent before is still to be read.
    private var hungUp = false
    /// Readiness reports so far (the tests see a busy loop in it).
    private(set) var readiness = 0
    /// Whether the socket reads (its owner stops it while the other side cannot take more).
    public var reading = true {
        didSet { if reading != oldValue { updateInterest() } }
    }

    /// A connected descriptor (accepted, or one end of a socketpair), made non-blocking here.
    public init(adopting descriptor: Int32, on loop: EpollLoop, connecting: Bool = false) throws(LoopError) {
        self.descriptor = descriptor
        self.loop = loop
        self.connecting = connecting
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        interest = connecting ? EPOLLOUT.rawValue : EPOLLIN.rawValue
        try loop.register(descriptor, events: interest, self)
    }

    /// A TCP connection to `address`, under way: `connected` or `closed` tells how it went.
    public static func connect(to address: SocketAddress, on loop: EpollLoop) throws(LoopError) -> LoopSocket {
        let family = Int32(address.protocol.rawValue)
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        if family != AF_UNIX { setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) }
        let result = address.withSockAddr { Glibc.connect(descriptor, $0, socklen_t($1)) }
        guard result == 0 || errno == EINPROGRESS else {
            let error = errno
            Glibc.close(descriptor)
            throw .system("connect", error)
        }
        do {
            return try LoopSocket(adopting: descriptor, on: loop, connecting: true)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    /// Queues `bytes` and writes what the kernel takes now.
    public func send(_ bytes: ByteBuffer) {
        write(bytes)
        flush()
    }

    /// Queues `bytes` for the next `flush`: parts written together go in one system call.
    public func write(_ bytes: ByteBuffer) {
        guard isOpen, bytes.readableBytes > 0 else { return }
        queue.append(bytes)
        queuedBytes += bytes.readableBytes
    }

    /// Writes what is queued, as much as the kernel takes (the rest when it can).
    public func flush() {
        guard isOpen, !connecting, !queue.isEmpty, interest & EPOLLOUT.rawValue == 0 else { return }
        flushQueue()
    }

    /// Closes with a reset (TCP's RST, through a zero linger) rather than an orderly end: the peer
    /// learns that what it got was cut short. A Unix socket has no reset; it sees its end of file.
    /// The delegate hears nothing more.
    public func abort() {
        guard isOpen else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    /// Closes at once; what is queued is dropped. The delegate hears nothing more, and is let go.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        loop.forget(descriptor)
        Glibc.close(descriptor)
        queue.removeAll()
        queuedBytes = 0
        delegate = nil
    }

    public func ready(_ events: UInt32) {
        readiness += 1
        guard isOpen else { return }
        if connecting {
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            let error = pendingError()
            guard error == 0 else { return fail(error) }
            connecting = false
            updateInterest()
            delegate?.connected(self)
            if isOpen, !queue.isEmpty { flushQueue() }
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flushQueue() }
        guard isOpen else { return }
        if reading, events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            readOnce()
        } else if !reading, events & EPOLLERR.rawValue != 0, !hasUnread, case let error = pendingError(), error != 0 {
            // A reset with nothing left unread: the peer is gone, and nothing is waited for. With
            // bytes still unread (an answer's tail before the reset), they are read first, below.
            fail(error)
        } else if !reading, !hungUp, events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            // epoll reports these whatever the interest: level-triggered, they would wake the loop
            // at once, again and again. Edge-triggered until reading resumes, which reads what the
            // peer sent before it went, then its end.
            hungUp = true
            updateInterest()
        }
    }

    /// Whether the kernel holds bytes not read yet (peeked: reading the error would clear it).
    private var hasUnread: Bool {
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
    }

    private func pendingError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    /// One read per readiness, as level-triggered epoll allows: a busy connection does not starve
    /// the others. Read into the loop's scratch, then kept in a buffer of the size that arrived:
    /// a client sending a byte at a time holds a byte's worth, not a read buffer's.
    private func readOnce() {
        let result = loop.scratch.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if result > 0 {
            let buffer = loop.scratch.withUnsafeBytes { ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<result])) }
            return delegate?.received(buffer, on: self) ?? ()
        }
        if result < 0, errno == EAGAIN || errno == EINTR { return }
        fail(result < 0 ? errno : nil)
    }

    private func fail(_ error: Int32?) {
        let delegate = self.delegate
        close()
        delegate?.closed(self, error: error)
    }

    private func flushQueue() {
        while !queue.isEmpty {
            let written = writeSome()
            if written < 0 {
                guard errno == EAGAIN || errno == EINTR else { return fail(errno) }
                break
            }
            queuedBytes -= written
            bytesWritten += written
            var left = written
            while left > 0, let first = queue.first {
                if first.readableBytes <= left {
                    left -= first.readableBytes
                    queue.removeFirst()
                } else {
                    queue[0].moveReaderIndex(forwardBy: left)
                    left = 0
                }
            }
        }
        let wasWaiting = interest & EPOLLOUT.rawValue != 0
        updateInterest()
        if queue.isEmpty, wasWaiting { delegate?.drained(self) }
    }

    /// One `send` for one buffer, `sendmsg` for more (up to `LoopVectors.capacity`); MSG_NOSIGNAL,
    /// as a peer that is gone must cost an EPIPE, not the process (NIO ignored SIGPIPE for the
    /// whole process).
    private func writeSome() -> Int {
        if queue.count == 1 {
            return queue[0].withUnsafeReadableBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        return loop.vectors.gather(queue) { vectors in
            var message = msghdr()
            message.msg_iov = vectors.baseAddress
            message.msg_iovlen = vectors.count
            return sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL))
        }
    }

    private func updateInterest() {
        guard isOpen else { return }
        var wanted: UInt32 = 0
        if connecting || !queue.isEmpty { wanted |= EPOLLOUT.rawValue }
        if !connecting, reading { wanted |= EPOLLIN.rawValue }
        if hungUp, !reading { wanted |= EPOLLET.rawValue }
        guard wanted != interest else { return }
        interest = wanted
        do {
            try loop.change(descriptor, events: wanted)
        } catch {
            // The kernel no longer knows the descriptor as the loop does: the connection is over.
            guard case .system(_, let code) = error else { return fail(EBADF) }
            fail(code)
        }
    }
}
