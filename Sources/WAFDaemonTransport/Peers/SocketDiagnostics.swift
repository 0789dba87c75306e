import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, what `ss` reads): the owner of one TCP
/// socket, found by its four-tuple, and its state. One request and one answer per lookup, no
/// table read: the proxy's and `auth.listen`'s loopback peers are found this way (TENANT-6).
enum SocketDiagnostics {
    /// `TCP_ESTABLISHED` in the kernel's `tcp_states.h`.
    static let established: UInt8 = 1

    struct Socket: Equatable {
        let state: UInt8
        let uid: UInt32
        let inode: UInt32
    }

    private static let sockDiagByFamily: UInt16 = 20  // SOCK_DIAG_BY_FAMILY
    private static let netlinkSockDiag: Int32 = 4  // NETLINK_SOCK_DIAG
    private static let requestFlag: UInt16 = 1  // NLM_F_REQUEST
    private static let errorType: UInt16 = 2  // NLMSG_ERROR

    /// The TCP socket whose local end is `local` and remote end `remote`, as the kernel sees it;
    /// nil when there is none or the kernel cannot be asked.
    static func tcpSocket(local: SocketAddress, remote: SocketAddress) -> Socket? {
        guard let request = request(local: local, remote: remote) else { return nil }
        let descriptor = socket(AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), netlinkSockDiag)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        // The kernel answers a lookup at once; a bound keeps a broken one from holding a loop.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A signal arriving meanwhile (a reload's SIGHUP) interrupts the call, not the lookup.
        var sent: Int
        repeat { sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) } } while sent < 0 && errno == EINTR
        guard sent == request.count else { return nil }
        var answer = [UInt8](repeating: 0, count: 8192)
        var count: Int
        repeat { count = answer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) } } while count < 0 && errno == EINTR
        return count > 0 ? parse(Array(answer.prefix(count))) : nil
    }

    /// `nlmsghdr` + `inet_diag_req_v2` for the one socket of that four-tuple.
    static func request(local: SocketAddress, remote: SocketAddress) -> [UInt8]? {
        guard let localPort = local.port, let remotePort = remote.port else { return nil }
        let family: UInt8, source: [UInt8], destination: [UInt8]
        switch (local, remote) {
        case (.v4(let l), .v4(let r)):
            family = UInt8(AF_INET)
            source = withUnsafeBytes(of: l.address.sin_addr.s_addr) { Array($0) } + [UInt8](repeating: 0, count: 12)
            destination = withUnsafeBytes(of: r.address.sin_addr.s_addr) { Array($0) } + [UInt8](repeating: 0, count: 12)
        case (.v6(let l), .v6(let r)):
            family = UInt8(AF_INET6)
            source = withUnsafeBytes(of: l.address.sin6_addr) { Array($0) }
            destination = withUnsafeBytes(of: r.address.sin6_addr) { Array($0) }
        default:
            return nil
        }
        var body: [UInt8] = [family, UInt8(IPPROTO_TCP), 0, 0]
        body += littleEndian(UInt32.max)  // every state: the answer says which it is in
        body += bigEndian(UInt16(localPort)) + bigEndian(UInt16(remotePort)) + source + destination
        body += littleEndian(UInt32(0)) + littleEndian(UInt32.max) + littleEndian(UInt32.max)  // any interface, no cookie
        let length = UInt32(16 + body.count)
        return littleEndian(length) + littleEndian(sockDiagByFamily) + littleEndian(requestFlag) + littleEndian(UInt32(1)) + littleEndian(UInt32(0))
            + body
    }

    /// The state, owner and inode of the socket in an answer; nil for an error (none found).
    static func parse(_ answer: [UInt8]) -> Socket? {
        guard answer.count >= 16 + 72, integer(answer, at: 4, as: UInt16.self) != errorType else { return nil }
        let message = 16
        return Socket(
            state: answer[message + 1], uid: integer(answer, at: message + 64, as: UInt32.self),
            inode: integer(answer, at: message + 68, as: UInt32.self))
    }

    private static func integer<T: FixedWidthInteger>(_ bytes: [UInt8], at offset: Int, as: T.Type) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(bytes[offset + index]) }
        return value
    }

    private static func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    private static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }
}
