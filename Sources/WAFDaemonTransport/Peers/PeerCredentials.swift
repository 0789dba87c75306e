import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The connecting process, from `SO_PEERCRED`.
package struct PeerCredentials: Sendable, Hashable {
    package let pid: Int32
    package let uid: UInt32
    package let gid: UInt32

    package init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// Where a connection's peer credentials come from: the socket (`SO_PEERCRED`), or, in tests of the
/// handlers, a given answer.
package struct PeerCredentialsSource: Sendable {
    package let read: @Sendable (any Channel) -> EventLoopFuture<SocketPeerCredentials>?

    package static let socket = PeerCredentialsSource { channel in
        guard let socket = channel as? any SocketOptionProvider else { return nil }
        return socket.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SocketPeerCredentials.option))
    }

    /// A TCP peer nobody checks, on a listener that serves nothing secret (`metrics.listen`): one
    /// identity for them all, so that the per-user limit bounds them together.
    package static let network = fixed(SocketPeerCredentials(pid: 0, uid: networkUID, gid: networkUID))

    /// The uid that stands for "a peer on the network": no local user has it.
    package static let networkUID = UInt32.max - 1

    /// Every connection's peer is `credentials`.
    package static func fixed(_ credentials: SocketPeerCredentials) -> PeerCredentialsSource {
        PeerCredentialsSource { channel in channel.eventLoop.makeSucceededFuture(credentials) }
    }
}

/// Linux's `struct ucred`, which glibc only declares under `_GNU_SOURCE`, so Swift cannot see it;
/// `getsockopt(SO_PEERCRED)` fills this identical layout.
package struct SocketPeerCredentials: Sendable {
    /// `SO_PEERCRED` on every Linux architecture but a few (mips, parisc, sparc, powerpc).
    package static let option: Int32 = 17
    package var pid: Int32 = 0
    package var uid: UInt32 = 0
    package var gid: UInt32 = 0

    package init(pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}
