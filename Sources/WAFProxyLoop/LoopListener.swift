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
    /// At the descriptor limit (the errno that said so), once per episode: accepting waits.
    public var limitReached: ((Int32) -> Void)?
    /// Accepting works again after the limit: how many attempts were refused meanwhile.
    public var limitLifted: ((Int) -> Void)?
    /// The listener could not go on (the loop lost its descriptor) and closed.
    public var failed: ((LoopError) -> Void)?
    /// Attempts refused in this episode at the limit (0: not at the limit).
    private var refusals = 0
    private var backoff = LoopListener.firstBackoff
    private var retry: EpollLoop.Timer?
    static let firstBackoff: UInt64 = 50_000_000
    static let longestBackoff: UInt64 = 1_000_000_000

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
        if case .unixDomainSocket = address, let path = address.pathname { unlink(path) }
        let descriptor = try bind(address)
        do {
            return try LoopListener(adopting: descriptor, on: loop, accepted: accepted)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
    }

    /// A socket bound to `address` and listening, with no loop yet: connections wait in its
    /// backlog until a listener adopts it.
    public static func bind(_ address: SocketAddress) throws(LoopError) -> Int32 {
        let family = Int32(address.protocol.rawValue)
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system("socket", errno) }
        var one: Int32 = 1
        if family != AF_UNIX { setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) }
        guard address.withSockAddr({ Glibc.bind(descriptor, $0, socklen_t($1)) }) == 0, Glibc.listen(descriptor, 4096) == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw .system("bind or listen", error)
        }
        return descriptor
    }

    /// The port the kernel gave (a TCP listener bound to port 0).
    public var port: Int? { Self.port(of: descriptor) }

    /// The port `descriptor` is bound to (nil: not TCP).
    public static func port(of descriptor: Int32) -> Int? {
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
                if [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(errno) { pauseAccepting(errno) }
                return
            }
            if refusals > 0 {
                limitLifted?(refusals)
                refusals = 0
                backoff = Self.firstBackoff
            }
            guard let socket = try? LoopSocket(adopting: connection, on: loop) else {
                Glibc.close(connection)
                continue
            }
            accepted(socket)
        }
    }

    /// Out of descriptors, the connection stays in the backlog and the listener readable: the
    /// loop would wake at once, again and again. Accepting waits, 50 ms doubling to 1 s, or until
    /// a connection closes (`descriptorsFreed`).
    private func pauseAccepting(_ error: Int32) {
        if refusals == 0 {
            limitReached?(error)
        } else {
            backoff = min(backoff * 2, Self.longestBackoff)
        }
        refusals += 1
        watch(0)
        guard isOpen else { return }
        if let retry { loop.cancel(retry) }
        retry = loop.schedule(in: backoff) { [weak self] in self?.resume() }
    }

    /// A connection closed: a descriptor is free, so accepting may work again at once.
    public func descriptorsFreed() {
        guard refusals > 0, retry != nil else { return }
        backoff = Self.firstBackoff
        resume()
    }

    private func resume() {
        if let retry { loop.cancel(retry) }
        retry = nil
        guard isOpen else { return }
        watch(EPOLLIN.rawValue)
    }

    /// What the loop watches the socket for; a descriptor the kernel no longer knows ends the
    /// listener (`failed` says why) rather than leave it half registered.
    private func watch(_ events: UInt32) {
        do {
            try loop.change(descriptor, events: events)
        } catch {
            close()
            failed?(error)
        }
    }

    public func close() {
        guard isOpen else { return }
        isOpen = false
        if let retry { loop.cancel(retry) }
        loop.forget(descriptor)
        Glibc.close(descriptor)
    }
}
