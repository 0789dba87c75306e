import Logging
import WAFLocalTokenService

#if canImport(Glibc)
import Glibc
#endif

/// How to start `waf-tokend`.
public struct DaemonOptions: Sendable {
    public var sources: ConfigurationSources
    /// Run the local token service in process and point the provider at it.
    public var demo: Bool
    /// A listening socket passed by systemd (socket activation), served instead of `socket.path`.
    public var inheritedSocket: CInt?
    public var notifier: any ServiceNotifier
    public var logLevel: LogLevelControl
    public var version: String
    /// Testing only (`WAF_TOKEND_DEBUG_WEDGE_AFTER_SEC`): wedge the provider this long after the
    /// first token is cached.
    public var wedgeStateQueueAfter: Duration?

    public init(
        sources: ConfigurationSources, demo: Bool = false, inheritedSocket: CInt? = nil,
        notifier: any ServiceNotifier = NoServiceNotifier(), logLevel: LogLevelControl = LogLevelControl(),
        version: String = Daemon.version, wedgeStateQueueAfter: Duration? = nil
    ) {
        self.sources = sources
        self.demo = demo
        self.inheritedSocket = inheritedSocket
        self.notifier = notifier
        self.logLevel = logLevel
        self.version = version
        self.wedgeStateQueueAfter = wedgeStateQueueAfter
    }
}

/// `waf-tokend`: start, serve until SIGTERM or SIGINT, stop; with the contract's exit codes.
public enum Daemon {
    public static let version = "0.1.0"

    /// Runs the daemon and returns its exit code. Every failing exit is preceded by one line on
    /// stderr (and to the service manager) saying why.
    public static func run(_ options: DaemonOptions) async -> Int32 {
        SignalService.ignoreDefaultActions()
        var options = options
        var demoService: LocalTokenService?
        if options.demo {
            do {
                let demo = try await DemoMode.start(options.sources)
                demoService = demo.service
                options.sources = demo.sources
            } catch {
                return fail("cannot start the demo's local token service: \(error)", code: .failure, options)
            }
        }

        let configuration: DaemonConfiguration
        switch await ConfigurationLoader.load(options.sources) {
        case .failure(let error):
            let lines = error.issues.map { "  \($0.description)" }.joined(separator: "\n")
            return fail("invalid configuration (\(error.issues.count) problem\(error.issues.count == 1 ? "" : "s")):\n\(lines)", code: .configuration, options)
        case .success(let loaded):
            configuration = loaded
        }
        options.logLevel.level = configuration.logLevel
        let logger = Logger(label: "waf-tokend")
        raiseOpenFileLimit(logger: logger)

        let runtime: DaemonRuntime
        do {
            runtime = try await DaemonRuntime(configuration: configuration, sources: options.sources, options: options, logger: logger)
        } catch {
            return fail(error.message, code: error.code, options)
        }
        if let demoService, let url = demoService.applicationIntegrationURL {
            print(DemoMode.banner(configuration: configuration, serviceURL: url))
            fflush(nil)
        }
        let code = await runtime.run()
        await demoService?.stop()
        return code
    }

    /// `--check-config`: the effective configuration and 0, or every problem and 78.
    public static func checkConfiguration(_ sources: ConfigurationSources) async -> (output: String, errors: String, code: Int32) {
        switch await ConfigurationLoader.load(sources) {
        case .success(let configuration):
            return ("# effective configuration (command line > environment > \(sources.filePath) > defaults)\n" + configuration.effectiveYAML, "", 0)
        case .failure(let error):
            let lines = error.issues.map(\.description).joined(separator: "\n")
            return ("", "waf-tokend: invalid configuration:\n\(lines)\n", DaemonFailure.Code.configuration.rawValue)
        }
    }

    private static func fail(_ message: String, code: DaemonFailure.Code, _ options: DaemonOptions) -> Int32 {
        writeStandardError("waf-tokend: \(message)\n")
        options.notifier.failing(message.prefix { $0 != "\n" }.description, errno: code == .osError ? EIO : nil)
        return code.rawValue
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
