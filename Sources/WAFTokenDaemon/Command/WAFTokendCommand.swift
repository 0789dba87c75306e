import ArgumentParser

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

    @Flag(help: .hidden) var printConfigurationReference = false

    @OptionGroup(title: "Configuration keys") public var keys: KeyOptions

    public init() {}

    public func sources(environment: [String: String]) -> ConfigurationSources {
        ConfigurationSources(commandLine: keys.values, environment: environment, file: config)
    }

    public func run() async throws {
        if printConfigurationReference {
            print(ConfigurationReference.markdown)
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let sources = sources(environment: environment)
        if checkConfig {
            let result = Daemon.checkConfiguration(sources)
            print(result.output, terminator: "")
            writeStandardError(result.errors)
            throw ExitCode(result.code)
        }
        throw ExitCode(await Daemon.run(sources: sources, demo: demo))
    }
}
