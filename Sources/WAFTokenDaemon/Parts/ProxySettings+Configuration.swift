import Logging
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFTokenProxy

/// The proxy's settings and its connections' settings, made from the configuration here, in the
/// composition root: the proxy reads no configuration of its own (docs/architecture.md).
extension ProxySettings {
    /// `provider`'s proxy, or nil when its `proxy.listen` is unset; `route`: how its upstream is
    /// reached (the provider's egress, EGRESS-1), direct when not given.
    init?(_ provider: ProviderConfiguration, _ configuration: DaemonConfiguration, route: OutboundRoute = .direct) {
        guard let proxy = ProxyConfiguration(provider, configuration) else { return nil }
        let listen: Listen =
            switch proxy.listen {
            case .unix(let path): .unix(path)
            case .loopback(let host, let port): .loopback(host: host, port: port)
            }
        self.init(
            identity: proxy.identity, listen: listen, mode: proxy.mode, upstream: proxy.upstream,
            tokenIn: TokenPlacement(rawValue: proxy.tokenIn.rawValue) ?? .cookie, replayBufferBytes: proxy.replayBufferBytes,
            tokenWait: proxy.tokenWait, upstreamTimeout: proxy.upstreamTimeout, threads: proxy.threads, caFile: proxy.caFile,
            forwardProxy: route.proxy.map { ForwardProxy(host: $0.host, port: $0.port, authorization: $0.authorization, label: route.label) })
    }
}

extension ConnectionSettings {
    /// A proxy's: the provider's readers, narrowed by the proxy's own lists (TENANT-10); the
    /// socket's timeouts and limits (`socket`, the socket's settings as the daemon read them).
    init(proxy: ProxyConfiguration, socket: ConnectionSettings, logger: Logger) {
        let tcp = if case .loopback = proxy.listen { true } else { false }
        let readers = AccessPolicy(
            allowedUsers: proxy.readers.users, allowedGroups: proxy.readers.groups, keyPrefix: "the provider's readers", tcp: tcp, logger: logger)
        let policy =
            proxy.narrowing.map {
                AccessPolicy(
                    readers, narrowedBy: AccessPolicy(allowedUsers: $0.users, allowedGroups: $0.groups, keyPrefix: "proxy", tcp: tcp, logger: logger))
            } ?? readers
        self.init(
            policy: policy,
            idleTimeout: socket.idleTimeout, requestTimeout: socket.requestTimeout, maxConnections: socket.maxConnections,
            maxConnectionsPerUser: socket.maxConnectionsPerUser)
    }
}
