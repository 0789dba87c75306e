import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFTokenCore
import WAFTokenServiceHTTP

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A running daemon: the provider, its client, the socket server, sinks and state, and what
/// changes on reload.
final class DaemonRuntime: Sendable {
    private struct Reloadable: Sendable {
        var configuration: DaemonConfiguration
        var sinkPaths: TokenSinks.Paths
        var stateStore: StateStore?
        /// The token last written to sinks and state, so that a repeated event writes nothing.
        var persisted: WAFToken?
    }

    let options: DaemonOptions
    let sources: ConfigurationSources
    let logger: Logger
    let provider: WAFTokenProvider
    let client: ReloadableTokenFetcher
    let api: APIContext
    let server: SocketServer
    let metrics: DaemonMetrics
    let events: AsyncStream<WAFProviderEvent>
    private let sinks: TokenSinks
    private let current: NIOLockedValueBox<Reloadable>
    /// A reload in progress, and whether another SIGHUP came meanwhile.
    private let reloads = NIOLockedValueBox((running: false, again: false))

    /// Builds everything and binds the socket; nothing is served before `run()`.
    init(configuration: DaemonConfiguration, sources: ConfigurationSources, options: DaemonOptions, logger: Logger) async throws(DaemonFailure) {
        self.options = options
        self.sources = sources
        self.logger = logger
        // State first: an HTTP client, once made, must be shut down on every way out.
        let stateStore = configuration.stateDirectory.map(StateStore.init(directory:))
        let restored = try stateStore?.load(for: configuration.provider, logger: logger)
        if let restored { logger.info("restored the saved token", metadata: ["token.fingerprint": "\(WAFToken.fingerprint(of: restored.value))"]) }
        client = ReloadableTokenFetcher(try Self.makeClient(configuration, logger: logger))
        provider = WAFTokenProvider(
            configuration: configuration.provider, fetcher: client, scheduler: DispatchScheduler(label: "waf-tokend.provider"),
            options: WAFTokenProviderOptions(
                lifecycleProfile: configuration.lifecyclePlatform, jitter: configuration.refreshJitter,
                cookieSecure: configuration.cookieSecure, restoredToken: restored, logger: logger))
        // Subscribed before anything can happen that matters; a restored token is handled apart.
        events = provider.events(bufferingPolicy: .unbounded)
        metrics = DaemonMetrics()
        sinks = TokenSinks(logger: logger)
        current = NIOLockedValueBox(Reloadable(
            configuration: configuration,
            sinkPaths: .init(tokenFile: configuration.tokenFile, cookieJar: configuration.cookieJar), stateStore: stateStore))
        api = APIContext(
            provider: provider, settings: Self.apiSettings(configuration, logger: logger), metrics: metrics,
            events: EventBroadcaster(metrics: metrics),
            info: .init(version: options.version, socketPath: configuration.socketPath, demo: options.demo, pid: getpid()),
            logger: logger)
        server = SocketServer(api: api, path: configuration.socketPath, mode: configuration.socketMode, threads: configuration.socketThreads)
        do {
            try await server.start(inheritedDescriptor: options.inheritedSocket)
        } catch {
            provider.shutdown()
            await client.shutdown()
            throw error
        }
        logger.info(
            "serving the token API",
            metadata: [
                "socket": "\(server.listeningPath)", "activated": "\(options.inheritedSocket != nil)",
                "domain": "\(configuration.provider.domainName)", "platform": "\(configuration.lifecyclePlatform.rawValue)",
            ])
    }

    var configuration: DaemonConfiguration { current.withLockedValue { $0.configuration } }

    /// Serves until SIGTERM or SIGINT, then stops gracefully. Returns the exit code.
    func run() async -> Int32 {
        let group = ServiceGroup(configuration: .init(
            services: [
                .init(service: ProviderEventService(runtime: self)),
                .init(service: ReadinessService(runtime: self)),
                .init(service: SignalService(runtime: self)),
                .init(service: WatchdogService(runtime: self)),
                .init(service: ServerService(runtime: self)),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        var code: Int32 = 0
        do {
            try await group.run()
        } catch {
            logger.error("stopping after an error: \(error)")
            code = DaemonFailure.Code.failure.rawValue
        }
        // A wedged provider must not hold the stop up for ever.
        let provider = provider
        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            provider.shutdown()
            stopped.signal()
        }
        if stopped.wait(timeout: .now() + 5) == .timedOut {
            logger.error("the provider did not stop within 5 s; exiting without it")
            code = DaemonFailure.Code.failure.rawValue
        }
        sinks.flush()
        await client.shutdown()
        logger.info("stopped")
        return code
    }

    // MARK: Provider events

    func handle(_ event: WAFProviderEvent) {
        api.providerChanged()
        api.events.publish(event)
        switch event {
        case .tokenUpdated(let token, let origin):
            if origin == .fetched { metrics.countFetch(success: true) }
            persist(token)
        case .refreshFailed:
            metrics.countFetch(success: false)
        case .lifecycleChanged, .refreshHeld, .callbackFailed, .tokenDropped:
            break
        }
        reportStatus()
    }

    /// Writes a token to the sinks and the state directory, once.
    func persist(_ token: WAFToken) {
        let (paths, store, configuration, isNew) = current.withLockedValue { state in
            let isNew = state.persisted != token
            state.persisted = token
            return (state.sinkPaths, state.stateStore, state.configuration, isNew)
        }
        guard isNew else { return }
        let settings = provider.cookieManager.settings
        let cookie = settings.setTokenCookie
            ? WAFCookie(token: token, domainName: settings.domainName, path: settings.path, secure: settings.secure) : nil
        sinks.write(token, cookie: cookie, to: paths)
        if let store {
            do {
                try store.save(token, for: configuration.provider)
            } catch {
                logger.error("the token could not be saved", metadata: ["path": "\(store.path)", "error": "\(error)"])
            }
        }
    }

    func reportStatus() {
        let notifier = options.notifier
        provider.status { status in notifier.status(StatusLine.compose(status)) }
    }

    // MARK: Signals

    func lifecycleSignal(foreground: Bool, count: Int, name: String) {
        metrics.countSignal(name)
        let logger = logger
        // A SIGUSR2 in the background means closed; several coalesced into one event count as several.
        provider.updateLifecycle({ state in
            if foreground { return .foreground }
            var state = state
            for _ in 0..<min(count, 2) { state = state == .foreground ? .background : .closed }
            return state
        }) { lifecycle in
            logger.info("lifecycle signal", metadata: ["signal": "\(name)", "state": "\(lifecycle.state.rawValue)"])
        }
    }

    /// SIGHUP: reloads the file; an invalid one is refused, logged, and the old configuration kept.
    func reload() async {
        let start = reloads.withLockedValue { state -> Bool in
            if state.running {
                state.again = true
                return false
            }
            state.running = true
            return true
        }
        guard start else { return }
        metrics.countSignal("SIGHUP")
        repeat {
            options.notifier.reloading()
            await reloadOnce()
            options.notifier.ready()
            reportStatus()
        } while reloads.withLockedValue { state in
            defer { state.again = false }
            state.running = state.again
            return state.again
        }
    }

    private func reloadOnce() async {
        let loaded = await ConfigurationLoader.load(sources)
        switch loaded {
        case .failure(let error):
            metrics.countReload(success: false)
            logger.error("reload refused; the old configuration stays: \(error.issues.map(\.description).joined(separator: "; "))")
        case .success(let configuration):
            do {
                try apply(configuration)
                metrics.countReload(success: true)
                logger.notice("configuration reloaded")
            } catch {
                metrics.countReload(success: false)
                logger.error("reload refused; the old configuration stays: \(error)")
            }
        }
    }

    private func apply(_ new: DaemonConfiguration) throws(DaemonFailure) {
        let old = configuration
        // Build what can fail first, so that a refused reload changes nothing.
        let newClient = Self.clientSettingsChanged(old, new) ? try Self.makeClient(new, logger: logger) : nil
        if let newClient { client.replace(with: newClient) }
        if new.socketPath != old.socketPath || new.socketMode != old.socketMode || new.socketThreads != old.socketThreads {
            logger.warning("socket.path, socket.mode and socket.threads take effect at the next start")
        }
        options.logLevel.level = new.logLevel
        api.settings = Self.apiSettings(new, logger: logger)
        current.withLockedValue { state in
            state.configuration = new
            state.sinkPaths = .init(tokenFile: new.tokenFile, cookieJar: new.cookieJar)
            state.stateStore = new.stateDirectory.map(StateStore.init(directory:))
            state.persisted = nil
        }
        provider.reconfigure(new.provider, lifecycleProfile: new.lifecyclePlatform, jitter: new.refreshJitter, cookieSecure: new.cookieSecure)
        // New sink paths get the current token at once.
        if let cached = provider.cachedToken() { persist(cached.token) }
    }

    // MARK: Building blocks

    static func makeClient(_ configuration: DaemonConfiguration, logger: Logger) throws(DaemonFailure) -> HTTPTokenFetcher {
        do {
            return try HTTPTokenFetcher(
                settings: .init(
                    client: configuration.tokenServiceClient, timeout: .seconds(configuration.tokenServiceTimeoutSeconds),
                    caFile: configuration.tokenServiceCAFile),
                logger: logger)
        } catch {
            throw DaemonFailure(.configuration, "tokenService.caFile: \(configuration.tokenServiceCAFile ?? "") cannot be used: \(error)")
        }
    }

    private static func clientSettingsChanged(_ old: DaemonConfiguration, _ new: DaemonConfiguration) -> Bool {
        old.tokenServiceClient != new.tokenServiceClient || old.tokenServiceTimeoutSeconds != new.tokenServiceTimeoutSeconds
            || old.tokenServiceCAFile != new.tokenServiceCAFile
    }

    static func apiSettings(_ configuration: DaemonConfiguration, logger: Logger) -> APIContext.Settings {
        APIContext.Settings(
            policy: AccessPolicy(allowedUsers: configuration.allowedUsers, allowedGroups: configuration.allowedGroups, logger: logger),
            idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds)),
            requestTimeout: .seconds(Int64(configuration.requestTimeoutSeconds)))
    }
}
