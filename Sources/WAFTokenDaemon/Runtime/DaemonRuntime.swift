import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFServiceManager
import WAFSocketAPI
import WAFTokenCore
import WAFTokenProxy
import WAFTokenStorage

#if canImport(Glibc)
import Glibc
#endif

/// The running daemon, wired: it builds the providers, storage, the socket server and the
/// services, hands each its dependencies, and runs them under one `ServiceGroup`.
struct DaemonRuntime {
    /// How long a wedged provider may hold the stop up.
    static let providerStopLimit = Duration.seconds(5)

    private let services: [any Service]
    /// Among `services`, held typed: a cast of each `any Service` to it cost the runtime's scans
    /// for a bridging conformance, 4 % of a start and stop's CPU (docs/performance.md).
    private let providersService: ProvidersService
    private let parts: DaemonParts
    /// `waf-tokend exec`'s supervisor, when it runs.
    private let exec: ExecService?
    /// SIGTERM's and SIGINT's: the signal arming's, told the group when `run` makes it.
    private let stop: StopRequest

    /// Builds everything and binds the socket; nothing is served before `run()`.
    static func start(
        configuration: DaemonConfiguration, sources: ConfigurationSources, notifier: any ServiceNotifier, inherited: [InheritedListener],
        integration: DaemonIntegration, demo: Bool, exec execSettings: ExecService.Settings? = nil, logger: Logger
    ) async throws(DaemonFailure) -> DaemonRuntime {
        // Lists the sandbox would make meaningless are refused before anything starts (TENANT-14).
        let meaningless = SandboxCheck.problems(configuration)
        if !meaningless.isEmpty { throw DaemonFailure(.configuration, meaningless.joined(separator: "; ")) }
        // Armed now, on libdispatch's threads while the rest is made; bound to the signal service
        // below. Under exec, SIGHUP, SIGTERM and SIGINT are the child's.
        let arming = SignalArming(reloadsOnHangUp: execSettings == nil, stopsOnTerminate: execSettings == nil)
        // The client first (a CA file that cannot be read is a configuration error), then the
        // providers, each restoring its saved token; one that fails stops those made before it.
        let fetcherSettings = TokenFetcherSettings(configuration)
        let fetcher = ReloadableTokenFetcher(
            settings: fetcherSettings, direct: try fetcherSettings.makeFetcher(logger: logger),
            makeClient: { settings, proxy throws(DaemonFailure) in try settings.makeFetcher(proxy: proxy, logger: logger) })
        // Each provider's token service through its egress (EGRESS-1); credentials a provider
        // cannot use are a configuration error, found now.
        for provider in configuration.providers {
            fetcher.route(provider.name, try OutboundRoute.of(provider, to: provider.configuration.tokenServiceBaseURL, in: configuration))
        }
        for (provider, egress) in configuration.egressSummary {
            logger.info("egress: \(egress)", metadata: ["provider": "\(provider)"])
        }
        let metrics = DaemonMetrics()
        let generation = SnapshotGeneration()
        let providers = ProviderSet()
        let broadcaster = EventBroadcaster(metrics: metrics, providers: providers)
        let socket = ConnectionSettings(configuration, logger: logger)
        let api = APIContext(
            providers: providers, settings: socket, metrics: metrics, events: broadcaster, generation: generation,
            info: .init(version: Daemon.version, socketPath: configuration[Keys.socketPath], demo: demo, pid: getpid()), logger: logger)
        let listeners = APIListeners(configuration, api: api, logger: logger)
        listeners.reconfigure(configuration, logger: logger)
        var layout = StorageLayout(configuration)
        if let execSettings, execSettings.privateFile { layout.ownerOnly = [execSettings.tokenFile] }
        // Under exec, no socket unless the configuration names one.
        let servesSocket = execSettings == nil || configuration.isSet(Keys.socketPath)
        let persistence = TokenPersistence(layout: layout, logger: logger) { metrics.sinkWritesFailing.record($0) }
        let parts = DaemonParts(
            fetcher: fetcher, persistence: persistence, metrics: metrics,
            broadcaster: broadcaster, generation: generation, providers: providers, proxies: ProxyControllers(),
            status: StatusReporter(providers: providers, notifier: notifier), api: api, listeners: listeners, notifier: notifier,
            budget: MemoryBudget(total: configuration[Keys.limitsBufferedBytes]),
            hooks: DeliveryHooks(persistence: persistence, metrics: metrics, broadcaster: broadcaster, logger: logger),
            canaries: Canaries(metrics: metrics, broadcaster: broadcaster, logger: logger), logger: logger)
        metrics.canaryEvidence.withLockedValue { [canaries = parts.canaries] in $0 = { canaries.proxyChallengedAcceptedToken(provider: $0) } }
        do throws(DaemonFailure) {
            let factory = ProviderFactory(parts: parts)
            for provider in configuration.providers {
                let (entry, proxy) = try factory.make(provider, daemon: configuration, socket: socket.policy)
                providers.insert(entry)
                parts.proxies.insert(proxy, for: entry.name)
            }
            let reloader = Reloader(configuration: configuration, sources: sources, parts: parts)
            // Before the socket serves: a client that sees the daemon may signal it at once.
            let signals = SignalService(arming: arming, providers: providers, reloader: reloader, metrics: metrics, logger: logger)
            // The sockets the service manager passed go to the listeners they are for.
            var passed = PassedListeners(inherited)
            let claimed = listeners.claim(&passed)
            var proxySockets: [String: CInt] = [:]
            for provider in configuration.providers {
                guard let settings = ProxySettings(provider, configuration) else { continue }
                proxySockets[provider.name] = passed.take(settings.listen.listenerAddress(mode: settings.mode))
            }
            passed.closeUnclaimed(logger: logger)
            // The proxies first: a client that sees the socket answer may use a proxy at once.
            do throws(DaemonFailure) {
                for provider in configuration.providers {
                    try await parts.proxies.apply(provider, configuration, socket: socket, logger: logger, inherited: proxySockets[provider.name])
                }
                if servesSocket { try await listeners.start(inherited: claimed) }
            } catch {
                await parts.proxies.stopAll()
                throw error
            }
            logger.info(
                servesSocket ? "serving the token API" : "serving no socket: the providers run for exec",
                metadata: [
                    "socket": "\(servesSocket ? listeners.socket.listening : "off")", "activated": "\(!passed.isEmpty)",
                    // Under exec without a socket no listener starts, metrics.listen and auth.listen neither.
                    "metrics.listen": "\(servesSocket ? listeners.probes?.listening ?? "off" : "off")",
                    "auth.listen": "\(servesSocket ? listeners.auth?.listening ?? "off" : "off")",
                    "domain": "\(configuration.providers.map(\.domainName).joined(separator: ","))",
                    "providers": "\(providers.names.joined(separator: ","))",
                    "platform": "\(configuration[Keys.lifecyclePlatform].rawValue)",
                ])
            // Stopped in reverse: the server first (no new requests), then the providers, storage
            // last (every write done).
            let providersService = ProvidersService(
                providers: providers, hooks: parts.hooks, canaries: parts.canaries, limit: Self.providerStopLimit, logger: logger)
            let services: [any Service] = [
                parts.persistence,
                providersService,
                ReadinessService(
                    providers: providers, notifier: notifier, waitForToken: configuration[Keys.readinessWaitForToken], status: parts.status,
                    stop: signals.stop, reloads: reloader),
                signals,
                WatchdogService(notifier: notifier, probe: probe(providers, integration)),
                ListenersService(
                    listeners: listeners, proxies: parts.proxies, reloader: reloader, broadcaster: broadcaster, notifier: notifier,
                    logger: logger),
            ]
            let exec = execSettings.map { ExecService(settings: $0, providers: providers, persistence: parts.persistence, logger: logger) }
            return DaemonRuntime(services: services, providersService: providersService, parts: parts, exec: exec, stop: signals.stop)
        } catch {
            for entry in providers.all { entry.provider.shutdown() }
            await fetcher.shutdown()
            throw error
        }
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
        let logger = parts.logger
        // SIGTERM and SIGINT: the signal arming's (under exec the child's, and its end ends the group).
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { service in
                    // Named by its type: ServiceLifecycle's own name, `"\(service)"`, reflects over
                    // every stored property, each step a dynamic cast that scans the binary's
                    // conformance records: 10 % of start-up's CPU (docs/performance.md, "Start-up in detail").
                    .init(service: service, successTerminationBehavior: .cancelGroup, serviceName: _typeName(type(of: service), qualified: false))
                } + (exec.map { [.init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup, serviceName: "ExecService")] } ?? []),
                logger: logger))
        stop.attach(group)
        var code: Int32 = 0
        var failed = false
        do {
            try await group.run()
        } catch {
            logger.error("stopping after an error: \(error)")
            code = DaemonFailure.Code.failure.rawValue
            failed = true
        }
        if providersService.wedged.withLockedValue({ $0 }) {
            code = DaemonFailure.Code.failure.rawValue
        }
        parts.persistence.flush()
        await parts.fetcher.shutdown()
        logger.info("stopped")
        // Under exec, the child's status, unless the daemon's own part failed: then the child was
        // stopped for it, and a clean end of the child must not hide the failure.
        return failed ? code : exec?.exitStatus.withLockedValue({ $0 }) ?? code
    }
}
