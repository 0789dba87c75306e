import Logging
import NIOConcurrencyHelpers
import WAFTokenCore

/// SIGHUP: reads the configuration again and applies it by the Reload rules (docs/rules.md,
/// RELOAD-1…5). An invalid file is refused, logged, and the old configuration kept. Overlapping
/// reloads run one after the other; signals that arrive meanwhile make one more.
final class Reloader: Sendable {
    private struct State {
        var configuration: DaemonConfiguration
        var running = false
        var again = false
    }

    private let sources: ConfigurationSources
    private let provider: WAFTokenProvider
    private let fetcher: ReloadableTokenFetcher
    private let persistence: TokenPersistence
    private let api: APIContext
    private let proxy: ProxyController
    private let metrics: DaemonMetrics
    private let notifier: any ServiceNotifier
    private let status: StatusReporter
    private let logger: Logger
    private let state: NIOLockedValueBox<State>

    init(
        configuration: DaemonConfiguration, sources: ConfigurationSources, provider: WAFTokenProvider, fetcher: ReloadableTokenFetcher,
        persistence: TokenPersistence, api: APIContext, proxy: ProxyController, metrics: DaemonMetrics, notifier: any ServiceNotifier, status: StatusReporter,
        logger: Logger
    ) {
        state = NIOLockedValueBox(State(configuration: configuration))
        self.sources = sources
        self.provider = provider
        self.fetcher = fetcher
        self.persistence = persistence
        self.api = api
        self.proxy = proxy
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
                logger.notice("configuration reloaded")
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
        // What can fail first, so that a refused reload changes nothing.
        let replacement = TokenFetcherSettings(old) != TokenFetcherSettings(new) ? try TokenFetcherSettings(new).makeFetcher(logger: logger) : nil
        let settings = APIContext.Settings(new, logger: logger)
        let proxySettings = ProxySettings(new)
        do {
            try await proxy.apply(proxySettings, connection: proxySettings.map { .init(proxy: $0, new, logger: logger) } ?? settings)
        } catch {
            try? await replacement?.shutdown()
            throw error
        }
        if let replacement { fetcher.replace(with: replacement) }
        let later = Keys.all.filter { !$0.appliesOnReload && old.values[$0.name] != new.values[$0.name] }.map(\.name)
        if !later.isEmpty { logger.warning("\(later.joined(separator: ", ")) take effect at the next start") }
        LogLevelControl.process.level = new[Keys.logLevel]
        api.settings = settings
        // Storage learns the new identity and paths before the provider can hand it a record for them.
        persistence.configure(TokenPersistence.Target(new))
        provider.reconfigure(
            new.provider, lifecycleProfile: new[Keys.lifecyclePlatform], jitter: new[Keys.refreshJitter], cookieSecure: new[Keys.cookieSecure])
        state.withLockedValue { $0.configuration = new }
    }
}

extension TokenPersistence.Target {
    init(_ configuration: DaemonConfiguration) {
        self.init(
            identity: configuration.provider.identity, stateDirectory: configuration[Keys.stateDirectory],
            tokenFile: configuration[Keys.sinksTokenFile], cookieJar: configuration[Keys.sinksCookieJar])
    }
}
