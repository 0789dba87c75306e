import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who may connect and how long a connection may idle or take to send a request: the API
/// socket's and the proxy's, each reloadable.
package struct ConnectionSettings: Sendable {
    package var policy: AccessPolicy
    package var idleTimeout: TimeAmount
    package var requestTimeout: TimeAmount

    package init(policy: AccessPolicy, idleTimeout: TimeAmount, requestTimeout: TimeAmount) {
        self.policy = policy
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
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
}

/// One connection's facts, shared by its handlers on its event loop.
package final class ConnectionState {
    package init() {}

    /// nil until SO_PEERCRED was read; a connection's requests wait for it.
    package var peer: PeerCredentials?
    package var allowed = false
}

/// What the API handler tells the connection's guard about a request, outbound.
package enum ConnectionEvent: Sendable {
    /// A request head arrived: the request is being served, no timeout applies.
    case requestStarted
    /// The answer is complete; idle time starts (or the connection closes), unless part of the
    /// next request is already there: then its request time starts.
    case responseFinished(partialRequestPending: Bool)
}

/// Sent through every connection's pipeline when the daemon stops.
package struct ServerShutdownEvent: Sendable {}
