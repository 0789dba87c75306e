import Logging
import WAFDaemonConfiguration
import WAFServiceManager
import WAFTokenCore
import WAFVersion

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokend`: start, serve until SIGTERM or SIGINT, stop; with the contract's exit codes.
public enum Daemon {
    public static let version = WAFTokendVersion.current

    /// Runs the daemon and returns its exit code. Every failing exit is preceded by one line on
    /// stderr (and to the service manager) saying why.
    public static func run(sources: ConfigurationSources, demo: Bool) async -> Int32 {
        await run(sources: sources, demo: demo, exec: nil)
    }

    /// `exec`: `waf-tokend exec`'s supervisor runs too, and the exit code is its child's. `loaded`:
    /// `sources`' configuration, read already (`WAFTokendCommand.prepare`; never in demo mode,
    /// whose sources the start changes).
    static func run(
        sources: ConfigurationSources, demo: Bool, exec: ExecService.Settings?,
        loaded: Result<DaemonConfiguration, WAFConfigurationError>? = nil
    ) async -> Int32 {
        precondition(loaded == nil || !demo, "demo mode reads its configuration from the sources it makes")
        let code = await serve(sources: sources, demo: demo, exec: exec, loaded: loaded)
        // A stop that ends while a missing library's handler runs leaves the exit to it (status 1),
        // and exec's private directory, which it removes.
        LibraryFailure.waitIfFailing()
        return code
    }

    private static func serve(
        sources: ConfigurationSources, demo: Bool, exec: ExecService.Settings?, loaded preloaded: Result<DaemonConfiguration, WAFConfigurationError>?
    ) async -> Int32 {
        // Under exec, done before its signals were armed: ignoring a signal again after a
        // dispatch source for it exists would take the source's handler away.
        if exec == nil { SignalService.ignoreDefaultActions() }
        LibraryFailure.install()
        // A run action whose program closed its standard input early gets EPIPE, not the daemon
        // killed (the children start with every signal at its default).
        signal(SIGPIPE, SIG_IGN)
        let integration = DaemonIntegration.current
        let notifier = integration.makeNotifier()
        func fail(_ failure: DaemonFailure) -> Int32 {
            writeStandardError("waf-tokend: \(failure.message)\n")
            notifier.failing(String(failure.message.prefix { $0 != "\n" }), errno: failure.code == .osError ? EIO : nil)
            return failure.code.rawValue
        }
        let inherited: [InheritedListener]
        switch integration.passedSockets() {
        case .none: inherited = []
        case .sockets(let listeners): inherited = listeners
        case .unusable(let reason): return fail(DaemonFailure(.osError, reason))
        }

        var sources = sources
        var demoService: (any DemoTokenService)?
        if demo {
            guard let start = integration.startDemoService else { return fail(DaemonFailure(.failure, "this build has no demo mode")) }
            do {
                let service = try await start()
                demoService = service
                sources = try DemoMode.sources(sources, serviceURL: service.applicationIntegrationURL)
            } catch let failure as DaemonFailure {
                return fail(failure)
            } catch {
                return fail(DaemonFailure(.failure, "cannot start the demo's local token service: \(error)"))
            }
        }

        let configuration: DaemonConfiguration
        switch preloaded ?? ConfigurationLoader.load(sources) {
        case .failure(let error):
            await demoService?.stop()
            let lines = error.issues.map { "  \($0.description)" }.joined(separator: "\n")
            let count = error.issues.count
            return fail(DaemonFailure(.configuration, "invalid configuration (\(count) problem\(count == 1 ? "" : "s")):\n\(lines)"))
        case .success(let loaded):
            // exec runs the provider it wraps and no other: the others are not fetched, not
            // written, not refreshed (EXEC-5).
            configuration = exec.map { loaded.keeping(only: $0.provider) } ?? loaded
        }
        LogLevelControl.process.level = configuration[Keys.logLevel]
        let logger = Logger(label: "waf-tokend")
        raiseOpenFileLimit(logger: logger)

        let runtime: DaemonRuntime
        do {
            runtime = try await DaemonRuntime.start(
                configuration: configuration, sources: sources, notifier: notifier, inherited: inherited,
                integration: integration, demo: demo, exec: exec, logger: logger)
        } catch {
            await demoService?.stop()
            return fail(error)
        }
        if let demoService {
            print(DemoMode.banner(configuration: configuration, serviceURL: demoService.applicationIntegrationURL))
            fflush(nil)
        }
        let code = await runtime.run()
        await demoService?.stop()
        return code
    }

    /// `--check-config`: the effective configuration and 0, or every problem and 78.
    public static func checkConfiguration(_ sources: ConfigurationSources) -> (output: String, errors: String, code: Int32) {
        switch ConfigurationLoader.load(sources) {
        case .success(let configuration):
            // Where each provider's requests leave the host, and why (EGRESS-1): comments, so
            // that the output stays a configuration file.
            let egress = configuration.egressSummary.map { "#   \($0.provider): \($0.egress)\n" }.joined()
            return (
                "# effective configuration (command line > environment > \(sources.filePath) > defaults)\n" + configuration.effectiveYAML
                    + "# egress of each provider (token service, canary, proxy upstream):\n" + egress, "", 0
            )
        case .failure(let error):
            let lines = error.issues.map(\.description).joined(separator: "\n")
            return ("", "waf-tokend: invalid configuration:\n\(lines)\n", DaemonFailure.Code.configuration.rawValue)
        }
    }

    /// Thousands of clients may connect at once: use all the descriptors the hard limit allows.
    private static func raiseOpenFileLimit(logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = min(limit.rlim_max, 1 << 20)
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
            logger.warning("cannot raise the open-file limit", metadata: ["errno": "\(errno)"])
        }
    }
}

func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}
