import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The user behind a loopback TCP connection. TCP has no SO_PEERCRED; the kernel's socket table
/// (`/proc/self/net/tcp`, `tcp6`: visible under ProcSubset=pid) lists the client's end of the connection, with its owner's
/// uid. The primary gid comes from the user database (a group list check then works as on the
/// Unix socket).
package enum LoopbackPeer {
    package static let source = PeerCredentialsSource { channel in
        guard let peer = channel.remoteAddress, let local = channel.localAddress,
            let uid = owner(client: peer, server: local)
        else { return nil }
        return channel.eventLoop.makeSucceededFuture(SocketPeerCredentials(pid: 0, uid: uid, gid: primaryGroup(of: uid) ?? .max))
    }

    /// The uid owning the socket whose local end is `client` and remote end `server`.
    package static func owner(
        client: SocketAddress, server: SocketAddress, tables: [String] = ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
    ) -> UInt32? {
        guard let local = tableForm(client), let remote = tableForm(server) else { return nil }
        for table in tables {
            guard let text = read(table) else { continue }
            if let uid = owner(in: text, local: local, remote: remote) { return uid }
        }
        return nil
    }

    /// Looks `local`/`remote` up in the text of a socket table: `sl local rem st … uid …`.
    package static func owner(in table: String, local: String, remote: String) -> UInt32? {
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 7, fields[1] == local, fields[2] == remote else { continue }
            return UInt32(fields[7])
        }
        return nil
    }

    /// An address as the socket tables write it: the address's 32-bit words in host byte order
    /// as hex, a colon, the port as hex (`0100007F:1F90` for 127.0.0.1:8080).
    package static func tableForm(_ address: SocketAddress) -> String? {
        guard let port = address.port else { return nil }
        var bytes: [UInt8]
        switch address {
        case .v4(let v4):
            bytes = withUnsafeBytes(of: v4.address.sin_addr.s_addr) { Array($0) }
        case .v6(let v6):
            bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        default:
            return nil
        }
        var text = ""
        for word in stride(from: 0, to: bytes.count, by: 4) {
            // The table prints each word as a host-order integer: little-endian bytes reversed.
            text += bytes[word..<(word + 4)].reversed().map(hex).joined()
        }
        return text + ":" + hex(UInt16(port))
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }

    private static func hex(_ port: UInt16) -> String { hex(UInt8(port >> 8)) + hex(UInt8(port & 0xFF)) }

    private static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func primaryGroup(of uid: UInt32) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_gid
    }
}
