import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who may connect and how long a connection may idle or take to send a request: the API
/// socket's and the proxy's, each reloadable.
struct ConnectionSettings: Sendable {
    var policy: AccessPolicy
    var idleTimeout: TimeAmount
    var requestTimeout: TimeAmount

    init(policy: AccessPolicy, idleTimeout: TimeAmount, requestTimeout: TimeAmount) {
        self.policy = policy
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
    }
}

/// What `ConnectionGuardHandler` needs of the listener it guards.
protocol ConnectionGuardContext: AnyObject, Sendable {
    /// "socket" or "proxy", for the log.
    var listenerName: String { get }
    var connectionSettings: ConnectionSettings { get }
    var logger: Logger { get }
    var metrics: DaemonMetrics { get }
}

/// One connection's facts, shared by its handlers on its event loop.
final class ConnectionState {
    /// nil until SO_PEERCRED was read; a connection's requests wait for it.
    var peer: PeerCredentials?
    var allowed = false
}

/// What the API handler tells the connection's guard about a request, outbound.
enum ConnectionEvent: Sendable {
    /// A request head arrived: the request is being served, no timeout applies.
    case requestStarted
    /// The answer is complete; idle time starts (or the connection closes), unless part of the
    /// next request is already there: then its request time starts.
    case responseFinished(partialRequestPending: Bool)
}

/// Where a connection's peer credentials come from: the socket (`SO_PEERCRED`), or, in tests of the
/// handlers, a given answer.
struct PeerCredentialsSource: Sendable {
    let read: @Sendable (any Channel) -> EventLoopFuture<SocketPeerCredentials>?

    static let socket = PeerCredentialsSource { channel in
        guard let socket = channel as? any SocketOptionProvider else { return nil }
        return socket.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SocketPeerCredentials.option))
    }

    /// Every connection's peer is `credentials`.
    static func fixed(_ credentials: SocketPeerCredentials) -> PeerCredentialsSource {
        PeerCredentialsSource { channel in channel.eventLoop.makeSucceededFuture(credentials) }
    }
}

/// Linux's `struct ucred`, which glibc only declares under `_GNU_SOURCE`, so Swift cannot see it;
/// `getsockopt(SO_PEERCRED)` fills this identical layout.
struct SocketPeerCredentials: Sendable {
    /// `SO_PEERCRED` on every Linux architecture but a few (mips, parisc, sparc, powerpc).
    static let option: Int32 = 17
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Sent through every connection's pipeline when the daemon stops.
struct ServerShutdownEvent: Sendable {}
