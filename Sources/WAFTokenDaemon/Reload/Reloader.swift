import Logging
import NIOConcurrencyHelpers
import WAFTokenCore

/// SIGHUP: reads the configuration again and applies it by the Reload rules (docs/rules.md,
/// RELOAD-1…5, MULTI-6), provider by provider: a provider added starts fetching; one removed stops
/// and its token leaves memory, its token file, the cookie jar and its state file at once; one
/// changed follows the Reload rules on its own. An invalid file, or a set that cannot be applied,
/// is refused whole, logged, and the old configuration kept. Overlapping reloads run one after
/// the other; signals that arrive meanwhile make one more.
final class Reloader: Sendable {
    private struct State {
        var configuration: DaemonConfiguration
        var running = false
        var again = false
    }

    private let sources: ConfigurationSources
    private let providers: ProviderSet
    private let factory: ProviderFactory
    private let fetcher: ReloadableTokenFetcher
    private let persistence: TokenPersistence
    private let api: APIContext
    private let metrics: DaemonMetrics
    private let notifier: any ServiceNotifier
    private let status: StatusReporter
    private let logger: Logger
    private let state: NIOLockedValueBox<State>

    init(
        configuration: DaemonConfiguration, sources: ConfigurationSources, providers: ProviderSet, factory: ProviderFactory,
        fetcher: ReloadableTokenFetcher, persistence: TokenPersistence, api: APIContext, metrics: DaemonMetrics, notifier: any ServiceNotifier,
        status: StatusReporter, logger: Logger
    ) {
        state = NIOLockedValueBox(State(configuration: configuration))
        self.sources = sources
        self.providers = providers
        self.factory = factory
        self.fetcher = fetcher
        self.persistence = persistence
        self.api = api
        self.metrics = metrics
        self.notifier = notifier
        self.status = status
        self.logger = logger
    }

    func reload() async {
        let start = state.withLockedValue { state -> Bool in
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        guard start else { return }
        repeat {
            notifier.reloading()
            await reloadOnce()
            notifier.ready()
            status.report()
        } while state.withLockedValue { state in
            defer { state.again = false }
            state.running = state.again
            return state.again
        }
    }

    private func reloadOnce() async {
        switch ConfigurationLoader.load(sources) {
        case .failure(let error):
            refused(error.issues.map(\.description).joined(separator: "; "))
        case .success(let new):
            do throws(DaemonFailure) {
                try await apply(new)
                metrics.countReload(success: true)
                logger.notice("configuration reloaded", metadata: ["providers": "\(providers.names.joined(separator: ","))"])
            } catch {
                refused(error.message)
            }
        }
    }

    private func refused(_ reason: String) {
        metrics.countReload(success: false)
        logger.error("reload refused; the old configuration stays: \(reason)")
    }

    private func apply(_ new: DaemonConfiguration) async throws(DaemonFailure) {
        let old = state.withLockedValue { $0.configuration }
        let socket = ConnectionSettings(new, logger: logger)
        // What can fail first, so that a refused reload changes nothing: the client, the providers
        // added (their state files), their proxies and the changed proxies.
        let replacement = TokenFetcherSettings(old) != TokenFetcherSettings(new) ? try TokenFetcherSettings(new).makeFetcher(logger: logger) : nil
        let running = Dictionary(uniqueKeysWithValues: providers.all.map { ($0.name, $0) })
        // One app, one lifecycle: a provider added starts in the state the others are in.
        let lifecycle = providers.all.first?.provider.status().lifecycle.state ?? .foreground
        var added: [ProviderEntry] = []
        var changed: [(entry: ProviderEntry, old: ProviderConfiguration)] = []
        do throws(DaemonFailure) {
            for provider in new.providers {
                if let entry = running[provider.name] {
                    changed.append((entry, entry.configuration))
                    entry.update(provider, access: ProviderFactory.access(provider, socket: socket.policy, logger: logger))
                } else {
                    let entry = try factory.make(provider, daemon: new, socket: socket.policy, lifecycle: lifecycle)
                    added.append(entry)
                    try await DaemonRuntime.startProxy(entry, new, socket: socket, logger: logger)
                }
            }
            for (entry, _) in changed { try await DaemonRuntime.startProxy(entry, new, socket: socket, logger: logger) }
        } catch {
            for entry in added { await factory.retire(entry) }
            for (entry, previous) in changed {
                entry.update(previous, access: ProviderFactory.access(previous, socket: api.settings.policy, logger: logger))
                try? await DaemonRuntime.startProxy(entry, old, socket: api.settings, logger: logger)
            }
            try? await replacement?.shutdown()
            throw error
        }
        if let replacement { fetcher.replace(with: replacement) }
        let later = Keys.all.filter { !$0.appliesOnReload && old.values[$0.name] != new.values[$0.name] }.map(\.name)
        if !later.isEmpty { logger.warning("\(later.joined(separator: ", ")) take effect at the next start") }
        LogLevelControl.process.level = new[Keys.logLevel]
        api.settings = socket
        // Storage learns the new identities and paths before a provider can hand it a record for
        // them; a removed provider's files go with it.
        persistence.configure(TokenPersistence.Layout(new))
        for (entry, _) in changed {
            entry.provider.reconfigure(
                entry.configuration.configuration, lifecycleProfile: new[Keys.lifecyclePlatform], jitter: new[Keys.refreshJitter],
                cookieSecure: new[Keys.cookieSecure])
        }
        for entry in added { providers.insert(entry) }
        let kept = Set(new.providers.map(\.name))
        for name in running.keys where !kept.contains(name) {
            guard let entry = providers.remove(name) else { continue }
            await factory.retire(entry)
            metrics.forget(provider: name)
            logger.notice("provider removed", metadata: ["provider": "\(name)"])
        }
        for entry in added { logger.notice("provider added", metadata: ["provider": "\(entry.name)", "domain": "\(entry.configuration.domainName)"]) }
        // Cached answers and their access decisions are rebuilt.
        api.generation.advance()
        state.withLockedValue { $0.configuration = new }
    }
}
