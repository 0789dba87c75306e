import ArgumentParser
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `waf-tokend`: every configuration key is also an option (`--domain-name`, `--socket-path`, …),
/// above the environment and the file in precedence.
public struct WAFTokendCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "waf-tokend",
        abstract: "Keeps a fresh AWS WAF token and serves it over a Unix socket.",
        discussion: """
            Configuration comes from the command line, then WAF_TOKEND_* environment variables (the key in \
            upper snake case, e.g. WAF_TOKEND_DOMAIN_NAME), then the YAML file, then defaults. \
            Signals: SIGUSR1 foreground; SIGUSR2 background (again: closed); SIGHUP reload; SIGTERM, SIGINT stop. \
            Exit codes: 0 clean stop, 78 invalid configuration, 71 cannot bind the socket or read the state, 1 otherwise.
            """,
        version: Daemon.version)

    @Option(help: "The YAML configuration file (default: /etc/waf-tokend/waf-tokend.yaml, if it exists).")
    public var config: String?

    @Flag(help: "Validate the configuration, print the effective one and exit (0, or 78 with every problem).")
    public var checkConfig = false

    @Flag(help: "Start a local token service in this process and point the provider at it (no AWS account needed).")
    public var demo = false

    @Option(help: .init(WAFConfigurationKey.applicationIntegrationUrl.help)) var applicationIntegrationUrl: String?
    @Option(help: .init(WAFConfigurationKey.domainName.help)) var domainName: String?
    @Option(help: .init(WAFConfigurationKey.backgroundRefreshEnabled.help)) var backgroundRefreshEnabled: String?
    @Option(help: .init(WAFConfigurationKey.maxErrorTokenRefreshDelayMsec.help)) var maxErrorTokenRefreshDelayMsec: String?
    @Option(help: .init(WAFConfigurationKey.maxRetryCount.help)) var maxRetryCount: String?
    @Option(help: .init(WAFConfigurationKey.setTokenCookie.help)) var setTokenCookie: String?
    @Option(help: .init(WAFConfigurationKey.tokenCookiePath.help)) var tokenCookiePath: String?
    @Option(help: .init(WAFConfigurationKey.tokenRefreshDelaySec.help)) var tokenRefreshDelaySec: String?
    @Option(help: .init(DaemonKey.lifecyclePlatform.help)) var lifecyclePlatform: String?
    @Option(help: .init(DaemonKey.socketPath.help)) var socketPath: String?
    @Option(help: .init(DaemonKey.socketMode.help)) var socketMode: String?
    @Option(help: .init(DaemonKey.socketAllowedUsers.help)) var socketAllowedUsers: String?
    @Option(help: .init(DaemonKey.socketAllowedGroups.help)) var socketAllowedGroups: String?
    @Option(help: .init(DaemonKey.socketIdleTimeoutSec.help)) var socketIdleTimeoutSec: String?
    @Option(help: .init(DaemonKey.socketRequestTimeoutSec.help)) var socketRequestTimeoutSec: String?
    @Option(help: .init(DaemonKey.socketThreads.help)) var socketThreads: String?
    @Option(help: .init(DaemonKey.tokenServiceClient.help)) var tokenServiceClient: String?
    @Option(help: .init(DaemonKey.tokenServiceTimeoutSec.help)) var tokenServiceTimeoutSec: String?
    @Option(help: .init(DaemonKey.tokenServiceCAFile.help)) var tokenServiceCaFile: String?
    @Option(help: .init(DaemonKey.refreshJitter.help)) var refreshJitter: String?
    @Option(help: .init(DaemonKey.cookieSecure.help)) var cookieSecure: String?
    @Option(help: .init(DaemonKey.sinksTokenFile.help)) var sinksTokenFile: String?
    @Option(help: .init(DaemonKey.sinksCookieJar.help)) var sinksCookieJar: String?
    @Option(help: .init(DaemonKey.stateDirectory.help)) var stateDirectory: String?
    @Option(help: .init(DaemonKey.logLevel.help)) var logLevel: String?
    @Option(help: .init(DaemonKey.readinessWaitForToken.help)) var readinessWaitForToken: String?

    public init() {}

    /// The options given, by configuration key.
    public var commandLineValues: [String: String] {
        let values: [(String, String?)] = [
            (WAFConfigurationKey.applicationIntegrationUrl.rawValue, applicationIntegrationUrl),
            (WAFConfigurationKey.domainName.rawValue, domainName),
            (WAFConfigurationKey.backgroundRefreshEnabled.rawValue, backgroundRefreshEnabled),
            (WAFConfigurationKey.maxErrorTokenRefreshDelayMsec.rawValue, maxErrorTokenRefreshDelayMsec),
            (WAFConfigurationKey.maxRetryCount.rawValue, maxRetryCount),
            (WAFConfigurationKey.setTokenCookie.rawValue, setTokenCookie),
            (WAFConfigurationKey.tokenCookiePath.rawValue, tokenCookiePath),
            (WAFConfigurationKey.tokenRefreshDelaySec.rawValue, tokenRefreshDelaySec),
            (DaemonKey.lifecyclePlatform.rawValue, lifecyclePlatform),
            (DaemonKey.socketPath.rawValue, socketPath),
            (DaemonKey.socketMode.rawValue, socketMode),
            (DaemonKey.socketAllowedUsers.rawValue, socketAllowedUsers),
            (DaemonKey.socketAllowedGroups.rawValue, socketAllowedGroups),
            (DaemonKey.socketIdleTimeoutSec.rawValue, socketIdleTimeoutSec),
            (DaemonKey.socketRequestTimeoutSec.rawValue, socketRequestTimeoutSec),
            (DaemonKey.socketThreads.rawValue, socketThreads),
            (DaemonKey.tokenServiceClient.rawValue, tokenServiceClient),
            (DaemonKey.tokenServiceTimeoutSec.rawValue, tokenServiceTimeoutSec),
            (DaemonKey.tokenServiceCAFile.rawValue, tokenServiceCaFile),
            (DaemonKey.refreshJitter.rawValue, refreshJitter),
            (DaemonKey.cookieSecure.rawValue, cookieSecure),
            (DaemonKey.sinksTokenFile.rawValue, sinksTokenFile),
            (DaemonKey.sinksCookieJar.rawValue, sinksCookieJar),
            (DaemonKey.stateDirectory.rawValue, stateDirectory),
            (DaemonKey.logLevel.rawValue, logLevel),
            (DaemonKey.readinessWaitForToken.rawValue, readinessWaitForToken),
        ]
        return Dictionary(uniqueKeysWithValues: values.compactMap { key, value in value.map { (key, $0) } })
    }

    public func sources(environment: [String: String]) -> ConfigurationSources {
        ConfigurationSources(commandLine: commandLineValues, environment: environment, file: config)
    }

    public func run() async throws {
        let sources = sources(environment: ProcessInfo.processInfo.environment)
        if checkConfig {
            let result = await Daemon.checkConfiguration(sources)
            print(result.output, terminator: "")
            writeStandardError(result.errors)
            throw ExitCode(result.code)
        }
        let integration = ServiceManagerIntegration.current
        let notifier = integration.makeNotifier()
        let socket: CInt?
        switch integration.inheritedSocket() {
        case .success(let descriptor):
            socket = descriptor
        case .failure(let failure):
            writeStandardError("waf-tokend: \(failure.message)\n")
            notifier.failing(failure.message, errno: nil)
            throw ExitCode(failure.code.rawValue)
        }
        let environment = ProcessInfo.processInfo.environment
        let wedge = environment["WAF_TOKEND_DEBUG_WEDGE_AFTER_SEC"].flatMap(Double.init).map { Duration.milliseconds(Int64($0 * 1000)) }
        let code = await Daemon.run(DaemonOptions(
            sources: sources, demo: demo, inheritedSocket: socket, notifier: notifier, logLevel: .process,
            wedgeStateQueueAfter: wedge))
        throw ExitCode(code)
    }
}
