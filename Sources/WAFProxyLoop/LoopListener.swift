import CEpoll
import Glibc
import NIOCore

/// A listening socket on an `EpollLoop`: each connection it accepts becomes a `LoopSocket` handed
/// to `accepted`, on the loop's thread.
public final class LoopListener: LoopHandler {
    public let descriptor: Int32
    private unowned let loop: EpollLoop
    private let accepted: (LoopSocket) -> Void
    public private(set) var isOpen = true

    /// A descriptor already bound and listening (one of ours, or one systemd passed).
    public init(adopting descriptor: Int32, on loop: EpollLoop, accepted: @escaping (LoopSocket) -> Void) throws(LoopError) {
        self.descriptor = descriptor
        self.loop = loop
        self.accepted = accepted
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        try loop.register(descriptor, events: EPOLLIN.rawValue, self)
    }

    /// Binds and listens on `address` (a Unix socket's file left from an earlier run is removed).
    public static func listen(
        on address: SocketAddress, on loop: EpollLoop, accepted: @escaping (LoopSocket) -> Void
    ) throws(LoopError)
        -> LoopListener
    {
        let family = Int32(address.protocol.rawValue)
        if case .unixDomainSocket = address, let path = address.pathname { unlink(path) }
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        if family != AF_UNIX { setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) }
        guard address.withSockAddr({ bind(descriptor, $0, socklen_t($1)) }) == 0, Glibc.listen(descriptor, 4096) == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw .system("bind or listen", error)
        }
        do {
            return try LoopListener(adopting: descriptor, on: loop, accepted: accepted)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    /// The port the kernel gave (a TCP listener bound to port 0).
    public var port: Int? {
        var address = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        // sin_port and sin6_port sit at the same offset, after the family.
        guard got == 0, address.sin6_family == sa_family_t(AF_INET) || address.sin6_family == sa_family_t(AF_INET6) else { return nil }
        return Int(UInt16(bigEndian: address.sin6_port))
    }

    /// Up to 64 connections per readiness, so that a flood of them does not starve the rest.
    public func ready(_ events: UInt32) {
        for _ in 0..<64 where isOpen {
            let connection = accept4(descriptor, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
            guard connection >= 0 else {
                if errno == EMFILE || errno == ENFILE { pauseAccepting() }
                return
            }
            guard let socket = try? LoopSocket(adopting: connection, on: loop) else {
                Glibc.close(connection)
                continue
            }
            accepted(socket)
        }
    }

    /// Out of descriptors, the connection stays in the backlog and the listener readable: the
    /// loop would wake at once, again and again. Accepting waits 100 ms, as the daemon's own
    /// listeners do at the limit.
    private func pauseAccepting() {
        loop.change(descriptor, events: 0)
        loop.schedule(in: 100_000_000) { [weak self] in
            guard let self, isOpen else { return }
            loop.change(descriptor, events: EPOLLIN.rawValue)
        }
    }

    public func close() {
        guard isOpen else { return }
        isOpen = false
        loop.forget(descriptor)
        Glibc.close(descriptor)
    }
}
