import Logging
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
    private var stopped = false
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
            /// The same address with new settings: the route is made (its TLS context too).
            case update(ProxySettings, ProxyRoute)
            /// Another address: a new listener, bound but not accepting until the commit.
            case replace(ProxyServer)
        }
        fileprivate let kind: Kind
    }

    /// A listener a commit took out of service: stopped by `stop()`, which waits for its
    /// requests in flight (at most `grace`), after the rest of the reload is in force.
    package struct Retired: Sendable {
        fileprivate let server: ProxyServer?

        package func stop() async { await server?.stop(grace: ProxyController.grace) }
    }

    /// Makes the running proxy what `settings` say (nil: none); on failure it stays as it was.
    /// `inherited`: the listening socket the service manager passed for this proxy, used when a
    /// new listener is made.
    package func apply(_ settings: ProxySettings?, connection: ConnectionSettings, inherited: CInt? = nil) async throws(ProxyFailure) {
        await commit(try await prepare(settings, connection: connection, inherited: inherited)).stop()
    }

    /// Makes ready what can fail (the route's TLS context, a new listener) without touching the
    /// proxy that serves. A new listener accepts no connection before the commit: none is served
    /// under lists a refused reload never put in force.
    package func prepare(_ settings: ProxySettings?, connection: ConnectionSettings, inherited: CInt? = nil) async throws(ProxyFailure) -> Change {
        guard !stopped else { throw .settings("the proxy is stopping") }
        switch (server, settings) {
        case (nil, nil):
            return Change(kind: .unchanged)
        case (.some, nil):
            return Change(kind: .off)
        case (let running?, let settings?) where running.settings.listen == settings.listen:
            // The address stays, and so does its listener: rebinding it would leave a moment in
            // which another uid could take a loopback port, and a socket systemd passed cannot be
            // bound again. Its mode changes in place; its threads at the next start.
            return Change(kind: .update(settings, try running.context.route(for: settings, connection: connection)))
        case (_, let settings?):
            let replacement = try ProxyServer(
                entry: entry, settings: settings, connection: connection, metrics: metrics, budget: budget, logger: logger)
            do {
                try await replacement.start(inherited: inherited, accepting: false)
            } catch {
                await replacement.stop(grace: .zero)
                throw error
            }
            return Change(kind: .replace(replacement))
        }
    }

    /// Puts a prepared change in force; it cannot fail. What it took out of service is returned,
    /// to be stopped once the rest of the reload is in force too.
    package func commit(_ change: Change) -> Retired {
        guard !stopped else {
            if case .replace(let replacement) = change.kind { return Retired(server: replacement) }
            return Retired(server: nil)
        }
        switch change.kind {
        case .unchanged:
            return Retired(server: nil)
        case .off:
            let running = server
            server = nil
            board.off()
            logger.notice("proxy stopped (proxy.listen is no longer set)")
            return Retired(server: running)
        case .update(let settings, let route):
            guard let running = server else { return Retired(server: nil) }
            let old = running.context.route.settings
            running.context.install(route)
            if old.upstream != settings.upstream { running.closeIdle() }
            if old.mode != settings.mode, case .unix(let path) = settings.listen, !SocketFile.setMode(path, settings.mode) {
                logger.warning("proxy.mode: cannot set mode 0\(String(settings.mode, radix: 8)) on \(path); it keeps its mode until the next start")
            }
            // Against what the listener was made with: a reload back to it is no change.
            if running.settings.threads != settings.threads, old.threads != settings.threads {
                logger.notice(
                    "proxy.threads: \(settings.threads) takes effect at the next start; the proxy keeps \(running.settings.threads) until then")
            }
            board.serving(settings, at: running.address)
            return Retired(server: nil)
        case .replace(let replacement):
            let replaced = server
            server = replacement
            replacement.startAccepting()
            board.serving(replacement.settings, at: replacement.address)
            logger.info(
                "proxy serving",
                metadata: [
                    "proxy.listen": "\(replacement.address)", "proxy.upstream": "\(replacement.settings.upstream.url)",
                    "proxy.tokenIn": "\(replacement.settings.tokenIn.rawValue)",
                ])
            return Retired(server: replaced)
        }
    }

    /// Lets go of a prepared change that will not be committed: a listener bound for it stops.
    package func discard(_ change: Change) async {
        guard case .replace(let replacement) = change.kind else { return }
        await replacement.stop(grace: .zero)
    }

    /// Where the proxy listens, as bound; nil when it is off.
    package var address: String? { server?.address }

    /// Stops the proxy for good: a reload that comes after it changes nothing.
    package func stop() async {
        // Taken before the await: a commit that runs meanwhile finds it stopped, and leaves
        // nothing listening that no one would stop.
        stopped = true
        let running = server
        server = nil
        await running?.stop(grace: Self.grace)
    }
}

extension ProxyBoard {
    /// The proxy serves `settings` at `address` (as bound: a port 0 resolved).
    package func serving(_ settings: ProxySettings, at address: String) {
        serving(listen: address, upstream: settings.upstream.url, tokenIn: settings.tokenIn.rawValue)
    }
}
