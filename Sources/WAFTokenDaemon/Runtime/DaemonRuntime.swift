import Dispatch
import Logging
import ServiceLifecycle
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// The running daemon, wired: it builds the provider, storage, the socket server and the
/// services, hands each its dependencies, and runs them under one `ServiceGroup`.
struct DaemonRuntime {
    private let services: [any Service]
    private let provider: WAFTokenProvider
    private let persistence: TokenPersistence
    private let fetcher: ReloadableTokenFetcher
    private let logger: Logger

    /// Builds everything and binds the socket; nothing is served before `run()`.
    static func start(
        configuration: DaemonConfiguration, sources: ConfigurationSources, notifier: any ServiceNotifier, inheritedSocket: CInt?,
        integration: DaemonIntegration, demo: Bool, logger: Logger
    ) async throws(DaemonFailure) -> DaemonRuntime {
        // State first: an HTTP client, once made, must be shut down on every way out.
        let restored = try configuration[Keys.stateDirectory].map(StateStore.init(directory:))?.load(
            for: configuration.provider.identity, logger: logger)
        if let restored { logger.info("restored the saved token", metadata: ["token.fingerprint": "\(WAFToken.fingerprint(of: restored.value))"]) }
        let fetcher = ReloadableTokenFetcher(try TokenFetcherSettings(configuration).makeFetcher(logger: logger))
        let persistence = TokenPersistence(target: .init(configuration), logger: logger)
        let metrics = DaemonMetrics()
        let generation = SnapshotGeneration()
        let provider = WAFTokenProvider(
            configuration: configuration.provider, fetcher: fetcher, scheduler: DispatchScheduler(label: "waf-tokend.provider"),
            options: WAFTokenProviderOptions(
                lifecycleProfile: configuration[Keys.lifecyclePlatform], jitter: configuration[Keys.refreshJitter],
                cookieSecure: configuration[Keys.cookieSecure], restoredToken: restored, persist: persistence.persist,
                snapshotChanged: generation.advance, logger: logger))
        // Subscribed before anything can happen that matters.
        let events = provider.events(bufferingPolicy: .unbounded)
        let broadcaster = EventBroadcaster(metrics: metrics)
        let board = ProxyBoard()
        let api = APIContext(
            provider: provider, settings: .init(configuration, logger: logger), metrics: metrics, events: broadcaster,
            generation: generation,
            info: .init(version: Daemon.version, socketPath: configuration[Keys.socketPath], demo: demo, pid: getpid()), proxy: board,
            logger: logger)
        let server = SocketServer(
            api: api, path: configuration[Keys.socketPath], mode: configuration[Keys.socketMode], threads: configuration[Keys.socketThreads])
        let proxy = ProxyController(provider: provider, metrics: metrics, board: board, logger: logger)
        let status = StatusReporter(provider: provider, notifier: notifier)
        let reloader = Reloader(
            configuration: configuration, sources: sources, provider: provider, fetcher: fetcher, persistence: persistence, api: api,
            proxy: proxy, metrics: metrics, notifier: notifier, status: status, logger: logger)
        // Before the socket serves: a client that sees the daemon may signal it at once.
        let signals = SignalService(provider: provider, reloader: reloader, metrics: metrics, logger: logger)
        do throws(DaemonFailure) {
            try await server.start(inheritedDescriptor: inheritedSocket)
            do throws(DaemonFailure) {
                let settings = ProxySettings(configuration)
                try await proxy.apply(settings, connection: settings.map { .init(proxy: $0, configuration, logger: logger) } ?? api.settings)
            } catch {
                await server.stop(grace: .zero)
                throw error
            }
        } catch {
            provider.shutdown()
            await fetcher.shutdown()
            throw error
        }
        logger.info(
            "serving the token API",
            metadata: [
                "socket": "\(server.listeningPath)", "activated": "\(inheritedSocket != nil)",
                "domain": "\(configuration.provider.domainName)", "platform": "\(configuration[Keys.lifecyclePlatform].rawValue)",
            ])
        // Stopped in reverse: the server first (no new requests), storage last (every write done).
        let services: [any Service] = [
            persistence,
            ProviderEventsService(events: events, broadcaster: broadcaster, metrics: metrics, status: status),
            ReadinessService(provider: provider, notifier: notifier, waitForToken: configuration[Keys.readinessWaitForToken], status: status),
            signals,
            WatchdogService(notifier: notifier, probe: integration.livenessProbe(provider)),
            SocketServerService(server: server, broadcaster: broadcaster, notifier: notifier, logger: logger),
            ProxyService(controller: proxy),
        ]
        return DaemonRuntime(services: services, provider: provider, persistence: persistence, fetcher: fetcher, logger: logger)
    }

    /// Serves until SIGTERM or SIGINT, then stops gracefully. Returns the exit code.
    func run() async -> Int32 {
        let group = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
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
        persistence.flush()
        await fetcher.shutdown()
        logger.info("stopped")
        return code
    }
}
