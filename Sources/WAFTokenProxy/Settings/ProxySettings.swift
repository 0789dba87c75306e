import WAFHTTPWire
import WAFTokenCore

/// What a provider's proxy serves, as values of the proxy's own: the composition root makes them
/// from the configuration (as it makes the socket API's `ConnectionSettings`), so that the proxy
/// knows no configuration key and no configuration module (docs/architecture.md).
package struct ProxySettings: Sendable, Equatable {
    /// Where the proxy listens: a Unix socket path, or a loopback address with a port.
    package enum Listen: Sendable, Hashable, CustomStringConvertible {
        case unix(String)
        case loopback(host: String, port: Int)

        package var description: String {
            switch self {
            case .unix(let path): path
            case .loopback(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            }
        }
    }

    package enum TokenPlacement: String, Sendable {
        case cookie, header
    }

    /// The forward proxy the upstream is reached through (EGRESS-1): a `CONNECT` tunnel to it.
    package struct ForwardProxy: Sendable, Equatable {
        package var host: String
        package var port: Int
        /// `Proxy-Authorization`'s value, from the credentials file (never logged).
        package var authorization: String?
        /// The egress label of logs and metrics: `host:port`.
        package var label: String

        package init(host: String, port: Int, authorization: String?, label: String) {
            self.host = host
            self.port = port
            self.authorization = authorization
            self.label = label
        }
    }

    /// The identity the route's tokens must be fetched for (TENANT-2).
    package var identity: WAFTokenIdentity
    package var listen: Listen
    /// The mode of a Unix socket's file.
    package var mode: UInt16
    package var upstream: UpstreamTarget
    package var tokenIn: TokenPlacement
    package var replayBufferBytes: Int
    package var tokenWait: Duration
    package var upstreamTimeout: Duration
    package var threads: Int
    /// The CA certificates an https upstream is checked against (nil: the system's).
    package var caFile: String?
    /// Nil: the upstream is reached directly.
    package var forwardProxy: ForwardProxy?

    package init(
        identity: WAFTokenIdentity, listen: Listen, mode: UInt16, upstream: UpstreamTarget, tokenIn: TokenPlacement, replayBufferBytes: Int,
        tokenWait: Duration, upstreamTimeout: Duration, threads: Int, caFile: String?, forwardProxy: ForwardProxy? = nil
    ) {
        self.identity = identity
        self.listen = listen
        self.mode = mode
        self.upstream = upstream
        self.tokenIn = tokenIn
        self.replayBufferBytes = replayBufferBytes
        self.tokenWait = tokenWait
        self.upstreamTimeout = upstreamTimeout
        self.threads = threads
        self.caFile = caFile
        self.forwardProxy = forwardProxy
    }
}
