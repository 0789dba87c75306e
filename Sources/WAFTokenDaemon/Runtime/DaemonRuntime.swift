import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// The running daemon, wired: it builds the providers, storage, the socket server and the
/// services, hands each its dependencies, and runs them under one `ServiceGroup`.
struct DaemonRuntime {
    private let services: [any Service]
    private let providers: ProviderSet
    private let persistence: TokenPersistence
    private let fetcher: ReloadableTokenFetcher
    private let logger: Logger

    /// Builds everything and binds the socket; nothing is served before `run()`.
    static func start(
        configuration: DaemonConfiguration, sources: ConfigurationSources, notifier: any ServiceNotifier, inheritedSocket: CInt?,
        integration: DaemonIntegration, demo: Bool, logger: Logger
    ) async throws(DaemonFailure) -> DaemonRuntime {
        // The client first (a CA file that cannot be read is a configuration error), then the
        // providers, each restoring its saved token; one that fails stops those made before it.
        let fetcher = ReloadableTokenFetcher(try TokenFetcherSettings(configuration).makeFetcher(logger: logger))
        let persistence = TokenPersistence(layout: .init(configuration), logger: logger)
        let metrics = DaemonMetrics()
        let generation = SnapshotGeneration()
        let broadcaster = EventBroadcaster(metrics: metrics)
        let providers = ProviderSet()
        let status = StatusReporter(providers: providers, notifier: notifier)
        let factory = ProviderFactory(
            fetcher: fetcher, persistence: persistence, broadcaster: broadcaster, metrics: metrics, generation: generation, status: status,
            logger: logger)
        let socket = ConnectionSettings(configuration, logger: logger)
        let api = APIContext(
            providers: providers, settings: socket, metrics: metrics, events: broadcaster, generation: generation,
            info: .init(version: Daemon.version, socketPath: configuration[Keys.socketPath], demo: demo, pid: getpid()), logger: logger)
        let server = SocketServer(
            api: api, path: configuration[Keys.socketPath], mode: configuration[Keys.socketMode], threads: configuration[Keys.socketThreads])
        do throws(DaemonFailure) {
            for provider in configuration.providers { providers.insert(try factory.make(provider, daemon: configuration, socket: socket.policy)) }
            let reloader = Reloader(
                configuration: configuration, sources: sources, providers: providers, factory: factory, fetcher: fetcher, persistence: persistence,
                api: api, metrics: metrics, notifier: notifier, status: status, logger: logger)
            // Before the socket serves: a client that sees the daemon may signal it at once.
            let signals = SignalService(providers: providers, reloader: reloader, metrics: metrics, logger: logger)
            try await server.start(inheritedDescriptor: inheritedSocket)
            do throws(DaemonFailure) {
                for entry in providers.all { try await Self.startProxy(entry, configuration, socket: socket, logger: logger) }
            } catch {
                for entry in providers.all { await entry.proxy.stop() }
                await server.stop(grace: .zero)
                throw error
            }
            logger.info(
                "serving the token API",
                metadata: [
                    "socket": "\(server.listeningPath)", "activated": "\(inheritedSocket != nil)",
                    "domain": "\(configuration.providers.map(\.domainName).joined(separator: ","))",
                    "providers": "\(providers.names.joined(separator: ","))",
                    "platform": "\(configuration[Keys.lifecyclePlatform].rawValue)",
                ])
            // Stopped in reverse: the server first (no new requests), storage last (every write done).
            let services: [any Service] = [
                persistence,
                ReadinessService(providers: providers, notifier: notifier, waitForToken: configuration[Keys.readinessWaitForToken], status: status),
                signals,
                WatchdogService(notifier: notifier, probe: Self.probe(providers, integration)),
                SocketServerService(server: server, broadcaster: broadcaster, notifier: notifier, logger: logger),
                ProxyService(providers: providers),
            ]
            return DaemonRuntime(services: services, providers: providers, persistence: persistence, fetcher: fetcher, logger: logger)
        } catch {
            for entry in providers.all { entry.provider.shutdown() }
            await fetcher.shutdown()
            throw error
        }
    }

    /// Starts (or with a reload, changes) the proxy of `entry`, if its configuration has one.
    static func startProxy(
        _ entry: ProviderEntry, _ configuration: DaemonConfiguration, socket: ConnectionSettings, logger: Logger
    ) async throws(DaemonFailure) {
        let settings = ProxySettings(entry.configuration, configuration)
        try await entry.proxy.apply(settings, connection: settings.map { .init(proxy: $0, configuration, logger: logger) } ?? socket)
    }

    /// The watchdog's check: every provider's state context answers. Each provider's probe is
    /// made once, when the provider is first probed (a reload may add providers).
    private static func probe(_ providers: ProviderSet, _ integration: DaemonIntegration) -> DaemonIntegration.LivenessProbe {
        let made = NIOLockedValueBox<[ObjectIdentifier: DaemonIntegration.LivenessProbe]>([:])
        return { completion in
            let entries = providers.all
            let probes = made.withLockedValue { made in
                made = made.filter { id, _ in entries.contains { ObjectIdentifier($0.provider) == id } }
                return entries.map { entry in
                    let id = ObjectIdentifier(entry.provider)
                    if let probe = made[id] { return probe }
                    let probe = integration.livenessProbe(entry.provider)
                    made[id] = probe
                    return probe
                }
            }
            let answers = Countdown<Void>(entries.count) { _ in completion() }
            for probe in probes { probe { answers.arrived(()) } }
        }
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
        let entries = providers.all
        let stopped = DispatchSemaphore(value: 0)
        DispatchQueue(label: "waf-tokend.stop").async {
            for entry in entries { entry.provider.shutdown() }
            stopped.signal()
        }
        if stopped.wait(timeout: .now() + 5) == .timedOut {
            logger.error("a provider did not stop within 5 s; exiting without it")
            code = DaemonFailure.Code.failure.rawValue
        }
        persistence.flush()
        await fetcher.shutdown()
        logger.info("stopped")
        return code
    }
}
