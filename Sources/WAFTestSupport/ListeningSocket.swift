import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket a test binds itself and passes to a child, as systemd passes the sockets of
/// its socket units: a TCP port 0 (the port the system chose is then known before the child
/// starts, and nobody can take it meanwhile) or a Unix socket path. Closed with the value.
public final class ListeningSocket: Sendable {
    public let descriptor: CInt
    /// `127.0.0.1:PORT` with the port bound, or the path.
    public let address: String

    /// A TCP socket on `host`'s port 0.
    public init(tcp host: String = "127.0.0.1") throws {
        let address = try SocketAddress(ipAddress: host, port: 0)
        let descriptor = try Self.listen(address)
        self.descriptor = descriptor
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        let port = withUnsafeBytes(of: &storage) { raw in UInt16(raw[2]) << 8 | UInt16(raw[3]) }
        self.address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// A Unix socket at `path`.
    public init(unix path: String) throws {
        descriptor = try Self.listen(try SocketAddress(unixDomainSocketPath: path))
        address = path
    }

    deinit { close(descriptor) }

    private static func listen(_ address: SocketAddress) throws -> CInt {
        let descriptor = socket(Int32(address.protocol.rawValue), Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let bound = address.withSockAddr { pointer, size in bind(descriptor, pointer, socklen_t(size)) == 0 }
        guard bound, Glibc.listen(descriptor, 128) == 0 else {
            let code = errno
            close(descriptor)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        return descriptor
    }
}
