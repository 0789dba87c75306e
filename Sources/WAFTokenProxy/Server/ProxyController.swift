import Logging
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

/// Runs the proxy a provider's configuration asks for: starts it, applies a reload (new settings
/// in place, a new listener when its address changes, off when `proxy.listen` goes), stops it.
package actor ProxyController {
    private let entry: ProviderEntry
    private let metrics: any ProxyMetrics
    private let budget: MemoryBudget
    private let logger: Logger
    private var server: ProxyServer?
    package static let grace = Duration.seconds(5)

    package init(entry: ProviderEntry, metrics: any ProxyMetrics, budget: MemoryBudget, logger: Logger) {
        self.entry = entry
        self.metrics = metrics
        self.budget = budget
        self.logger = logger
    }

    private var board: ProxyBoard { entry.board }

    /// Makes the running proxy what `settings` say (nil: none). On failure the proxy stays as it was.
    /// `inherited`: the listening socket the service manager passed for this proxy, used when a new
    /// listener is made.
    package func apply(_ settings: ProxySettings?, connection: ConnectionSettings, inherited: CInt? = nil) async throws(ProxyFailure) {
        switch (server, settings) {
        case (nil, nil):
            return
        case (let running?, nil):
            await running.stop(grace: Self.grace)
            server = nil
            board.off()
            logger.notice("proxy stopped (proxy.listen is no longer set)")
        case (let running?, let settings?) where running.settings.sameListener(as: settings):
            let upstreamChanged = running.context.route.settings.upstream != settings.upstream
            try running.context.update(settings, connection: connection)
            if upstreamChanged { running.context.pools.closeIdle() }
            board.serving(settings, at: running.address)
        case (let running, let settings?):
            let replacement = try ProxyServer(
                entry: entry, settings: settings, connection: connection, metrics: metrics, budget: budget, logger: logger)
            // The same address must be let go before it can be bound again; another is bound first,
            // so that a failure leaves the old one serving.
            if let running, running.settings.listen == settings.listen {
                await running.stop(grace: Self.grace)
                server = nil
                board.off()
            }
            try await replacement.start(inherited: inherited)
            if let running = server { await running.stop(grace: Self.grace) }
            server = replacement
            board.serving(settings, at: replacement.address)
            logger.info(
                "proxy serving",
                metadata: [
                    "proxy.listen": "\(replacement.address)", "proxy.upstream": "\(settings.upstream.url)",
                    "proxy.tokenIn": "\(settings.tokenIn.rawValue)",
                ])
        }
    }

    /// Where the proxy listens, as bound; nil when it is off.
    package var address: String? { server?.address }

    package func stop() async {
        await server?.stop(grace: Self.grace)
        server = nil
    }
}

extension ConnectionSettings {
    /// The proxy's: the provider's readers, narrowed by the proxy's own lists (TENANT-10); the
    /// socket's timeouts and limits (`socket`, the socket's settings as the daemon read them).
    package init(proxy settings: ProxySettings, socket: ConnectionSettings, logger: Logger) {
        let tcp = if case .loopback = settings.listen { true } else { false }
        let readers = AccessPolicy(
            allowedUsers: settings.readers.users, allowedGroups: settings.readers.groups, keyPrefix: "the provider's readers", tcp: tcp,
            logger: logger)
        let policy =
            settings.narrowing.map {
                AccessPolicy(
                    readers, narrowedBy: AccessPolicy(allowedUsers: $0.users, allowedGroups: $0.groups, keyPrefix: "proxy", tcp: tcp, logger: logger))
            } ?? readers
        self.init(
            policy: policy,
            idleTimeout: socket.idleTimeout, requestTimeout: socket.requestTimeout, maxConnections: socket.maxConnections,
            maxConnectionsPerUser: socket.maxConnectionsPerUser)
    }
}

extension ProxyBoard {
    /// The proxy serves `settings` at `address` (as bound: a port 0 resolved).
    package func serving(_ settings: ProxySettings, at address: String) {
        serving(listen: address, upstream: settings.upstream.url, tokenIn: settings.tokenIn.rawValue)
    }
}
