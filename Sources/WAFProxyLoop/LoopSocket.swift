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
    public weak var delegate: (any LoopSocketDelegate)?
    private var queue: [ByteBuffer] = []
    /// Bytes queued and not yet taken by the kernel.
    public private(set) var queuedBytes = 0
    public private(set) var isOpen = true
    private var connecting: Bool
    private var interest: UInt32
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
        let family = address.protocol == .inet6 ? AF_INET6 : AF_INET
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
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

    /// Queues `bytes`, writing what the kernel takes now.
    public func send(_ bytes: ByteBuffer) {
        guard isOpen, bytes.readableBytes > 0 else { return }
        queue.append(bytes)
        queuedBytes += bytes.readableBytes
        if !connecting, queue.count == 1 { flushQueue() }
    }

    /// Closes at once; what is queued is dropped. The delegate hears nothing more.
    public func close() {
        guard isOpen else { return }
        isOpen = false
        loop.forget(descriptor)
        Glibc.close(descriptor)
        queue.removeAll()
        queuedBytes = 0
    }

    public func ready(_ events: UInt32) {
        guard isOpen else { return }
        if connecting {
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { return fail(error) }
            connecting = false
            updateInterest()
            delegate?.connected(self)
            if isOpen, !queue.isEmpty { flushQueue() }
            return
        }
        if events & EPOLLOUT.rawValue != 0 { flushQueue() }
        if isOpen, events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0, reading { readOnce() }
    }

    /// One read per readiness, as level-triggered epoll allows: a busy connection does not starve
    /// the others.
    private func readOnce() {
        var buffer = ByteBufferAllocator().buffer(capacity: 16 * 1024)
        var result = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { raw in
            result = read(descriptor, raw.baseAddress, raw.count)
            return max(0, result)
        }
        if result > 0 { return delegate?.received(buffer, on: self) ?? () }
        if result < 0, errno == EAGAIN || errno == EINTR { return }
        fail(result < 0 ? errno : nil)
    }

    private func fail(_ error: Int32?) {
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

    /// One `write` for one buffer, `writev` for more (up to 64).
    private func writeSome() -> Int {
        if queue.count == 1 {
            return queue[0].withUnsafeReadableBytes { write(descriptor, $0.baseAddress, $0.count) }
        }
        let parts = queue.prefix(64)
        var vectors: [iovec] = []
        vectors.reserveCapacity(parts.count)
        // The buffers stay alive in `queue` while the pointers are used.
        for part in parts {
            part.withUnsafeReadableBytes { vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)) }
        }
        return writev(descriptor, vectors, Int32(vectors.count))
    }

    private func updateInterest() {
        guard isOpen else { return }
        var wanted: UInt32 = 0
        if connecting || !queue.isEmpty { wanted |= EPOLLOUT.rawValue }
        if !connecting, reading { wanted |= EPOLLIN.rawValue }
        guard wanted != interest else { return }
        interest = wanted
        loop.change(descriptor, events: wanted)
    }
}
