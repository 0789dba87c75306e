import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The user behind a loopback TCP connection. TCP has no SO_PEERCRED; the kernel's socket
/// diagnostics name the owner of the client's end of the connection, and only an established
/// connection counts: a closed one's TIME_WAIT entry belongs to nobody (uid 0) and must never
/// make its client look like root (TENANT-6). The primary gid comes from the user database (a
/// group list check then works as on the Unix socket). No owner found: no credentials, refused.
package enum LoopbackPeer {
    package static let source = PeerCredentialsSource { channel in
        guard let peer = channel.remoteAddress, let local = channel.localAddress, let found = credentials(client: peer, server: local) else {
            return nil
        }
        return channel.eventLoop.makeSucceededFuture(found)
    }

    /// The credentials of the client at `client` connected to `server` (nil: no owner found).
    package static func credentials(client: SocketAddress, server: SocketAddress) -> SocketPeerCredentials? {
        guard let uid = owner(client: client, server: server) else { return nil }
        return SocketPeerCredentials(pid: 0, uid: uid, gid: primaryGroup(of: uid) ?? .max)
    }

    /// The uid owning the established socket whose local end is `client` and remote end `server`.
    static func owner(client: SocketAddress, server: SocketAddress) -> UInt32? {
        guard let socket = SocketDiagnostics.tcpSocket(local: client, remote: server), socket.state == SocketDiagnostics.established else {
            return nil
        }
        return socket.uid
    }

    private static func primaryGroup(of uid: UInt32) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_gid
    }
}
