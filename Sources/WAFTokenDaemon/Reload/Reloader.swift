import Logging
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore
import WAFTokenProxy
import WAFTokenServiceHTTP
import WAFTokenStorage

/// SIGHUP: reads the configuration again and applies it by the Reload rules (docs/rules.md,
/// RELOAD-1…5, MULTI-6), provider by provider: a provider added starts fetching; one removed stops
/// and its token leaves memory, its token file, the cookie jar and its state file at once; one
/// changed follows the Reload rules on its own. An invalid file, or a set that cannot be applied,
/// is refused whole, logged, and the old configuration kept. Overlapping reloads run one after
/// the other; signals that arrive meanwhile make one more.
///
/// A reload runs in two steps: `prepare` computes everything that can fail (a new token-service
/// client, the providers added, each proxy's change: a route with its TLS context, or a new
/// listener bound but not accepting) without changing what serves, and lets it all go when one
/// part fails; then `commit`, which cannot fail, puts it in force, the proxies' routes with the
/// new access lists. Once the daemon's stop began (`close`), no reload starts.
final class Reloader: ReloadGate {
    private struct State {
        var configuration: DaemonConfiguration
        var running = false
        var again = false
        var closed = false
        /// Until `release`: a SIGHUP during the start is applied once the start is done, not beside
        /// its proxies and listeners.
        var held = true
        /// Until `announce`: a reload tells the service manager nothing before the start's
        /// `READY=1` (`readiness.waitForToken` may wait long; a reload then still applies).
        var announced = false
        /// What `close` waits on: told when the reload under way ends.
        var closing: [@Sendable () -> Void] = []
    }

    /// What `prepare` made, for `commit` to put in place (or to undo).
    private struct Prepared {
        let plan: ReloadPlan
        let fetcher: HTTPTokenFetcher?
        /// Each provider's route to its token service under the new configuration.
        let routes: [String: OutboundRoute]
        let added: [(entry: ProviderEntry, proxy: ProxyController)]
        let socket: ConnectionSettings
        /// Each proxy's change, made ready: an added provider's new listener, a kept one's new
        /// route or listener. Put in force with the new lists (commit, step 3).
        let proxies: [(controller: ProxyController, change: ProxyController.Change)]
    }

    private let sources: ConfigurationSources
    private let parts: DaemonParts
    private let state: NIOLockedValueBox<State>

    init(configuration: DaemonConfiguration, sources: ConfigurationSources, parts: DaemonParts) {
        state = NIOLockedValueBox(State(configuration: configuration))
        self.sources = sources
        self.parts = parts
    }

    private var logger: Logger { parts.logger }

    func reload() async {
        let start = state.withLockedValue { state -> Bool in
            if state.closed { return false }
            if state.running || state.held {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        guard start else { return }
        while true {
            let announced = state.withLockedValue { $0.announced }
            if announced { parts.notifier.reloading() }
            await reloadOnce()
            if announced {
                parts.notifier.ready()
                parts.status.report()
            }
            let (again, closing) = state.withLockedValue { state in
                defer { state.again = false }
                state.running = state.again && !state.closed
                defer { if !state.running { state.closing = [] } }
                return (state.running, state.running ? [] : state.closing)
            }
            for ended in closing { ended() }
            if !again { return }
        }
    }

    /// The start is done (the service group runs): a SIGHUP that came during it is applied now,
    /// once. Detached: the reload is the signal's, not the caller's service's.
    func release() {
        let asked = state.withLockedValue { state -> Bool in
            state.held = false
            defer { state.again = false }
            return state.again
        }
        if asked { Task.detached { await self.reload() } }
    }

    /// The start told `READY=1`: reloads from now on tell `RELOADING=1` and `READY=1`.
    func announce() {
        state.withLockedValue { $0.announced = true }
    }

    /// The daemon stops: no reload begins from now on; true once the one under way, if any, has
    /// ended, so that the providers and proxies the stop stops are all there are. False after
    /// `limit`: a reload held by a wedged provider must not hold the stop up for ever.
    func close(within limit: Duration) async -> Bool {
        await BoundedWait.wait(within: limit) { ended in
            let idle = state.withLockedValue { state in
                state.closed = true
                if !state.running { return true }
                state.closing.append(ended)
                return false
            }
            if idle { ended() }
        }
    }

    private func reloadOnce() async {
        switch ConfigurationLoader.load(sources) {
        case .failure(let error):
            refused(error.issues.map(\.description).joined(separator: "; "))
        case .success(let new):
            do throws(DaemonFailure) {
                let plan = ReloadPlan(old: state.withLockedValue { $0.configuration }, new: new)
                await commit(try await prepare(plan))
                state.withLockedValue { $0.configuration = new }
                parts.metrics.countReload(success: true)
                logger.notice("configuration reloaded", metadata: ["providers": "\(parts.providers.names.joined(separator: ","))"])
            } catch {
                refused(error.message)
            }
        }
    }

    private func refused(_ reason: String) {
        parts.metrics.countReload(success: false)
        logger.error("reload refused; the old configuration stays: \(reason)")
    }

    // MARK: Step 1: what can fail

    private func prepare(_ plan: ReloadPlan) async throws(DaemonFailure) -> Prepared {
        let new = plan.new
        let meaningless = SandboxCheck.problems(new)
        if !meaningless.isEmpty { throw DaemonFailure(.configuration, meaningless.joined(separator: "; ")) }
        let socket = ConnectionSettings(new, logger: logger)
        // Each provider's egress (EGRESS-1), its credentials read: a file the daemon cannot use
        // refuses the reload, as at start.
        var routes: [String: OutboundRoute] = [:]
        for provider in new.providers {
            routes[provider.name] = try OutboundRoute.of(provider, to: provider.configuration.tokenServiceBaseURL, in: new)
        }
        let fetcher = plan.rebuildsFetcher ? try TokenFetcherSettings(new).makeFetcher(logger: logger) : nil
        // One app, one lifecycle: a provider added starts in the state the others are in.
        let lifecycle = parts.providers.all.first?.provider.status().lifecycle.state ?? .foreground
        let factory = ProviderFactory(parts: parts)
        var added: [(entry: ProviderEntry, proxy: ProxyController)] = []
        var proxies: [(controller: ProxyController, change: ProxyController.Change)] = []
        do throws(DaemonFailure) {
            for provider in plan.added {
                // Its first fetch starts as it is made: through its egress, never around it.
                if let route = routes[provider.name] { parts.fetcher.route(provider.name, route) }
                let made = try factory.make(provider, daemon: new, socket: socket.policy, lifecycle: lifecycle)
                added.append(made)
                let change = try await ProxyControllers.prepare(made.proxy, provider, new, socket: socket, logger: logger)
                proxies.append((made.proxy, change))
            }
            for (_, provider) in plan.kept {
                guard let controller = parts.proxies[provider.name] else { continue }
                let change = try await ProxyControllers.prepare(controller, provider, new, socket: socket, logger: logger)
                proxies.append((controller, change))
            }
        } catch {
            // Every added provider's route, made or not: one whose making failed had its route set.
            for provider in plan.added { parts.fetcher.forget(provider.name) }
            await undo(added: added, proxies: proxies, fetcher: fetcher)
            throw error
        }
        return Prepared(plan: plan, fetcher: fetcher, routes: routes, added: added, socket: socket, proxies: proxies)
    }

    /// Takes back what `prepare` did before it failed: the proxies' changes it made ready (a new
    /// listener, which accepted nothing), the providers it made, the client it built. The proxies
    /// that serve were not touched.
    private func undo(
        added: [(entry: ProviderEntry, proxy: ProxyController)], proxies: [(controller: ProxyController, change: ProxyController.Change)],
        fetcher: HTTPTokenFetcher?
    ) async {
        for (controller, change) in proxies { await controller.discard(change) }
        let factory = ProviderFactory(parts: parts)
        for (entry, proxy) in added {
            parts.hooks.remove(entry.name)
            parts.canaries.remove(entry.name)
            await factory.retire(entry, proxy: proxy)
        }
        try? await fetcher?.shutdown()
    }

    // MARK: Step 2: what cannot fail

    /// Puts the new configuration in force, in the order that keeps tenants apart (TENANT-2): a
    /// provider whose identity changes drops its old token first (its files, then memory); only
    /// then do the new access lists, names and routes apply. Until then the entries keep the old
    /// identity and lists, and no token of the new identity goes out under them.
    private func commit(_ prepared: Prepared) async {
        let plan = prepared.plan, new = plan.new
        if let fetcher = prepared.fetcher { parts.fetcher.replace(settings: TokenFetcherSettings(new), direct: fetcher) }
        // A provider whose egress changes fetches a token through the new one at once: its token
        // came from the old egress's address, which the WAF's reuse rules would see beside the
        // new one for as long as it lived (EGRESS-1).
        var rerouted: [String] = []
        for (name, route) in prepared.routes where parts.fetcher.route(name, route) { rerouted.append(name) }
        if !plan.deferredKeys.isEmpty { logger.warning("\(plan.deferredKeys.joined(separator: ", ")) take effect at the next start") }
        LogLevelControl.process.level = new[Keys.logLevel]
        // 0. A provider whose identity changes tells no one of tokens until its new settings
        //    apply (step 3), and its canary forgets what it saw of the old identity's token.
        for (old, provider) in plan.kept where old.identity != provider.identity {
            parts.hooks.remove(provider.name)
            if let entry = parts.providers.named(provider.name) { parts.canaries.remove(entry) }
        }
        // 1. Storage learns the new identities and paths; the files of a changed or removed
        //    provider are gone once this returns. First: a token of a new identity fetched
        //    quickly after step 2 is then stored (storage refuses a record of an identity it does
        //    not know, and one refused so would leave the files empty until the next refresh).
        await parts.persistence.configure(StorageLayout(new))
        // 2. Every kept provider takes its new settings; one whose identity changes has dropped
        //    its token once this returns (a record of its old identity is refused from step 1 on).
        for (_, provider) in plan.kept {
            await parts.providers.named(provider.name)?.provider.reconfigure(
                provider.configuration, lifecycleProfile: new[Keys.lifecyclePlatform], jitter: new[Keys.refreshJitter],
                cookieSecure: new[Keys.cookieSecure])
        }
        // 3. Now the new lists, names and routes, the proxies' among them.
        parts.listeners.reconfigure(new, logger: logger)
        var retired: [ProxyController.Retired] = []
        for (controller, change) in prepared.proxies { retired.append(await controller.commit(change)) }
        for (entry, proxy) in prepared.added { parts.proxies.insert(proxy, for: entry.name) }
        for (_, provider) in plan.kept {
            guard let entry = parts.providers.named(provider.name) else { continue }
            entry.update(.init(identity: provider.identity, domainName: provider.domainName, access: access(provider, prepared)))
            if plan.kept.contains(where: { $0.new.name == provider.name && $0.old.identity != $0.new.identity }) { entry.forcedRefresh.reset() }
            entry.forcedRefresh.interval = .seconds(new[Keys.refreshMinForcedIntervalSec])
        }
        for (entry, _) in prepared.added { parts.providers.insert(entry) }
        for (old, provider) in plan.kept {
            parts.hooks.configure(provider, new)
            guard let entry = parts.providers.named(provider.name) else { continue }
            parts.canaries.configure(entry, provider, new)
            // A token of the new identity fetched since step 2 found no hooks: they get it now.
            if old.identity != provider.identity, let token = entry.currentToken?.token.value { parts.hooks.tokenFetched(token, of: provider.name) }
        }
        for name in rerouted {
            guard let entry = parts.providers.named(name), plan.kept.contains(where: { $0.new.name == name }) else { continue }
            logger.notice("egress changed: a new token is fetched through it", metadata: ["provider": "\(name)"])
            _ = entry.provider.refreshToken { _, _ in }
        }
        let factory = ProviderFactory(parts: parts)
        for name in plan.removed {
            parts.fetcher.forget(name)
            guard let entry = parts.providers.remove(name) else { continue }
            await factory.retire(entry, proxy: parts.proxies.remove(name))
            parts.hooks.remove(name)
            parts.canaries.remove(name)
            parts.metrics.forget(provider: name)
            logger.notice("provider removed", metadata: ["provider": "\(name)"])
        }
        for provider in plan.added {
            logger.notice("provider added", metadata: ["provider": "\(provider.name)", "domain": "\(provider.domainName)"])
        }
        // 4. Cached answers and their access decisions are rebuilt; open streams are checked again,
        //    and those still allowed hear the tokens the new identities may already have.
        parts.generation.advance()
        parts.broadcaster.reauthorize()
        let switched = plan.kept.filter { $0.old.identity != $0.new.identity }.map(\.new.name) + plan.added.map(\.name)
        for name in switched {
            if let entry = parts.providers.named(name), let token = entry.currentToken?.token {
                parts.broadcaster.publish(.tokenUpdated(token, origin: .fetched), provider: name)
            }
        }
        // 5. The proxies' old listeners finish their requests in flight, together, now that
        //    nothing above waits for them.
        await withTaskGroup(of: Void.self) { group in
            for listener in retired { group.addTask { await listener.stop() } }
        }
    }

    private func access(_ provider: ProviderConfiguration, _ prepared: Prepared) -> AccessPolicy {
        ProviderFactory.access(provider, in: prepared.plan.new, socket: prepared.socket.policy, logger: logger)
    }
}
