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

    /// What a reload makes of this proxy, made ready by `prepare` and put in force by `commit`,
    /// or let go by `discard`.
    package struct Change: Sendable {
        fileprivate enum Kind: Sendable {
            case unchanged
            /// `proxy.listen` is no longer set: the proxy stops.
            case off
            /// The same listener with new settings: the route is made (its TLS context too).
            case update(ProxySettings, ProxyRoute)
            /// A new listener, bound; the old one, if any, stops at the commit. `freed`: the old
            /// one listened on the same address and was stopped already (an address cannot be
            /// bound twice), so a discard starts its settings again.
            case replace(ProxyServer, freed: ProxyServer?)
        }
        fileprivate let kind: Kind
    }

    /// Makes the running proxy what `settings` say (nil: none); on failure it stays as it was.
    /// `inherited`: the listening socket the service manager passed for this proxy, used when a
    /// new listener is made.
    package func apply(_ settings: ProxySettings?, connection: ConnectionSettings, inherited: CInt? = nil) async throws(ProxyFailure) {
        await commit(try await prepare(settings, connection: connection, inherited: inherited))
    }

    /// Makes ready what can fail (the route's TLS context, a new listener) without touching the
    /// proxy that serves, with one exception: a listener whose address stays but whose mode or
    /// threads change is stopped first, since its address cannot be bound twice.
    package func prepare(_ settings: ProxySettings?, connection: ConnectionSettings, inherited: CInt? = nil) async throws(ProxyFailure) -> Change {
        switch (server, settings) {
        case (nil, nil):
            return Change(kind: .unchanged)
        case (.some, nil):
            return Change(kind: .off)
        case (let running?, let settings?) where running.settings.sameListener(as: settings):
            return Change(kind: .update(settings, try running.context.route(for: settings, connection: connection)))
        case (let running, let settings?):
            let replacement = try ProxyServer(
                entry: entry, settings: settings, connection: connection, metrics: metrics, budget: budget, logger: logger)
            var freed: ProxyServer?
            if let running, running.settings.listen == settings.listen {
                await running.stop(grace: Self.grace)
                server = nil
                board.off()
                freed = running
            }
            do {
                try await replacement.start(inherited: inherited)
            } catch {
                if let freed { try? await restart(freed) }
                throw error
            }
            return Change(kind: .replace(replacement, freed: freed))
        }
    }

    /// Puts a prepared change in force; it cannot fail. A listener it replaces has stopped when it returns.
    package func commit(_ change: Change) async {
        switch change.kind {
        case .unchanged:
            return
        case .off:
            guard let running = server else { return }
            server = nil
            board.off()
            await running.stop(grace: Self.grace)
            logger.notice("proxy stopped (proxy.listen is no longer set)")
        case .update(let settings, let route):
            guard let running = server else { return }
            let upstreamChanged = running.context.route.settings.upstream != settings.upstream
            running.context.install(route)
            if upstreamChanged { running.context.pools.closeIdle() }
            board.serving(settings, at: running.address)
        case .replace(let replacement, _):
            let replaced = server
            server = replacement
            board.serving(replacement.settings, at: replacement.address)
            logger.info(
                "proxy serving",
                metadata: [
                    "proxy.listen": "\(replacement.address)", "proxy.upstream": "\(replacement.settings.upstream.url)",
                    "proxy.tokenIn": "\(replacement.settings.tokenIn.rawValue)",
                ])
            await replaced?.stop(grace: Self.grace)
        }
    }

    /// Lets go of a prepared change that will not be committed: a listener bound for it stops,
    /// and one stopped to free its address starts again.
    package func discard(_ change: Change) async {
        guard case .replace(let replacement, let freed) = change.kind else { return }
        await replacement.stop(grace: Self.grace)
        if let freed { try? await restart(freed) }
    }

    /// A stopped proxy's settings and limits, on its own address again, after a replacement
    /// there failed or was let go.
    private func restart(_ old: ProxyServer) async throws(ProxyFailure) {
        let server = try ProxyServer(
            entry: entry, settings: old.settings, connection: old.context.route.connection, metrics: metrics, budget: budget, logger: logger)
        try await server.start()
        self.server = server
        board.serving(old.settings, at: server.address)
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
