import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who may connect, how many, and how long a connection may idle or take to send a request: the
/// API socket's and each other listener's, each reloadable.
package struct ConnectionSettings: Sendable {
    package var policy: AccessPolicy
    package var idleTimeout: TimeAmount
    package var requestTimeout: TimeAmount
    package var maxConnections: Int
    package var maxConnectionsPerUser: Int

    package init(
        policy: AccessPolicy, idleTimeout: TimeAmount, requestTimeout: TimeAmount, maxConnections: Int = 4096, maxConnectionsPerUser: Int = 1024
    ) {
        self.policy = policy
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        self.maxConnections = maxConnections
        self.maxConnectionsPerUser = maxConnectionsPerUser
    }
}

/// What `ConnectionGuardHandler` needs of the listener it guards.
package protocol ConnectionGuardContext: AnyObject, Sendable {
    /// "socket" or "proxy", for the log.
    var listenerName: String { get }
    var connectionSettings: ConnectionSettings { get }
    var logger: Logger { get }
    /// Where refusals of the guard's own (408, 431) are counted.
    var requestCounting: any RequestCounting { get }
    /// The listener's connection counts and its refusal log.
    var limits: ListenerLimits { get }
}

/// One connection's facts, shared by its handlers on its event loop.
package final class ConnectionState {
    package init() {}

    /// nil until SO_PEERCRED was read; a connection's requests wait for it. A peer whose owner
    /// could not be found has a placeholder here, and `ownerKnown` false.
    /// (These fields without the runtime's exclusivity checks, read on each request: every
    /// method touches each once, calling nothing that could reach back.)
    @exclusivity(unchecked) package private(set) var peer: PeerCredentials?
    /// Whether the kernel told who the peer is. An unknown owner is refused on every request,
    /// whatever the lists say, before a reload and after (TENANT-11).
    @exclusivity(unchecked) package private(set) var ownerKnown = false
    /// Whether its peer is let in, as decided under the lists of `decidedAt`.
    @exclusivity(unchecked) package private(set) var allowed = false
    @exclusivity(unchecked) private var decidedAt: UInt64?

    /// Whether the peer is let in under `policy`, decided again when `generation` moved since the
    /// last decision: a reload may have changed the lists, and a kept-alive connection is checked
    /// on its next request (TENANT-3).
    package func allowed(under policy: @autoclosure () -> AccessPolicy, generation: UInt64) -> Bool {
        if decidedAt != generation {
            allowed = ownerKnown && policy().allows(peer)
            decidedAt = generation
        }
        return allowed
    }

    /// Who the peer is (`nil`: the kernel could not say: a placeholder nobody's lists name, and
    /// refused whatever they say), and the guard's decision when the connection opens, before
    /// anything else is read.
    package func identified(as peer: PeerCredentials?, allowed: Bool) {
        self.peer = peer ?? PeerCredentials(pid: -1, uid: .max, gid: .max)
        ownerKnown = peer != nil
        self.allowed = ownerKnown && allowed
        decidedAt = nil
    }
}

/// What the API handler tells the connection's guard about a request, outbound.
package enum ConnectionEvent: Sendable {
    /// A request head arrived: the request is being served, no timeout applies.
    case requestStarted
    /// The answer is complete; idle time starts (or the connection closes), unless part of the
    /// next request is already there: then its request time starts.
    case responseFinished(partialRequestPending: Bool)
}

/// Sent through every connection's pipeline when the daemon stops: what is under way is answered
/// by `deadline`, with `Connection: close`; a kept-alive connection between requests has the
/// guard's drain window (`ConnectionGuard.drainWindow`) to send its next request, which is
/// answered the same way, and is then closed cleanly (docs/systemd.md, "Restarts that consumers
/// do not see").
package struct ServerShutdownEvent: Sendable {
    package let deadline: NIODeadline

    package init(deadline: NIODeadline) {
        self.deadline = deadline
    }
}
