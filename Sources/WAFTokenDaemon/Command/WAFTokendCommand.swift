import ArgumentParser
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

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
            Providers besides the top-level one: providers.NAME in the file; --providers.NAME.KEY VALUE \
            (the key as the file writes it, e.g. --providers.pay.domainName) and WAF_TOKEND_PROVIDERS_NAME_KEY. \
            Signals: SIGUSR1 foreground; SIGUSR2 background (again: closed); SIGHUP reload; SIGTERM, SIGINT stop \
            (requests under way answered with Connection: close, idle connections closed cleanly). \
            Socket activation: systemd may pass the API socket (FileDescriptorName=api) and listeners for the proxies, \
            metrics.listen and auth.listen; each is served where its configured address is the passed socket's \
            (a proxy: waf-tokend-proxy@NAME.socket and Sockets= in a drop-in), and one that matches none is logged and closed. \
            Exit codes: 0 clean stop, 78 invalid configuration, 71 cannot bind the socket or read the state, 1 otherwise.
            """,
        version: Daemon.version)

    @Option(help: "The YAML configuration file (default: /etc/waf-tokend/waf-tokend.yaml, if it exists).")
    public var config: String?

    @Flag(help: "Validate the configuration, print the effective one and exit (0, or 78 with every problem).")
    public var checkConfig = false

    @Flag(help: "Start a local token service in this process and point the provider at it (no AWS account needed).")
    public var demo = false

    @Flag(
        help:
            "Get one token (the saved one if fresh, else a fetch), write the sinks and the state, print it and exit: 0, 69 without a token, 78 for a bad configuration."
    )
    public var once = false

    @Option(help: "With --once: the provider (default: the top-level one, or the only one).")
    public var provider: String?

    @Option(name: .customLong("print"), help: "With --once: print the bare token, or the Cookie header value (token|cookie).")
    var printed: OneShot.Output = .token

    @Flag(help: .hidden) var printConfigurationReference = false

    @OptionGroup(title: "Configuration keys") public var keys: KeyOptions

    public init() {}

    public func sources(environment: [String: String]) -> ConfigurationSources {
        Self.sources(keys: keys.values, environment: environment, file: config)
    }

    private static func sources(keys: [String: String], environment: [String: String], file: String?) -> ConfigurationSources {
        sources(keys: keys, providers: providerOptions.withLockedValue { $0 }, environment: environment, file: file)
    }

    private static func sources(
        keys: [String: String], providers: [String: String], environment: [String: String], file: String?
    )
        -> ConfigurationSources
    {
        ConfigurationSources(commandLine: keys.merging(providers) { $1 }, environment: environment, file: file)
    }

    /// A plain serving start's provider options and sources (`plainKeyOptions`, no `exec`); nil for
    /// any other command line.
    static func plainStart(_ arguments: [String], environment: () -> [String: String]) -> (options: [String: String], sources: ConfigurationSources)?
    {
        let (rest, options) = extractProviderOptions(arguments)
        guard rest.first != "exec", let plain = plainKeyOptions(rest) else { return nil }
        return (options, sources(keys: plain.keys, providers: options, environment: environment(), file: plain.config))
    }

    /// `--providers.NAME.KEY VALUE` (or `=VALUE`), taken out before ArgumentParser reads the rest:
    /// its options are declared, and these are as many as the providers.
    static let providerOptions = NIOLockedValueBox<[String: String]>([:])

    /// A plain serving start's sources and configuration, read by `prepare`.
    struct PreparedStart: Sendable {
        let sources: ConfigurationSources
        let loaded: Result<DaemonConfiguration, WAFConfigurationError>
    }
    /// What `prepare` read: `asked` once it ran (`start` nil for any other command line).
    private static let prepared = NIOLockedValueBox<(asked: Bool, start: PreparedStart?)>((false, nil))

    /// For a plain serving start (`plainKeyOptions`), reads the command line, the environment and
    /// the configuration now, on the calling thread, before the executors run: `main` takes them.
    /// Anything else is read by `main` as before. An executable that does not call it has `main`
    /// read the same, on its loop.
    public static func prepare() {
        let start = readPlainStart()
        prepared.withLockedValue { $0 = (true, start) }
    }

    private static func readPlainStart() -> PreparedStart? {
        guard let start = plainStart(Array(CommandLine.arguments.dropFirst()), environment: { processEnvironment() }) else { return nil }
        providerOptions.withLockedValue { $0 = start.options }
        // What `Daemon.serve` does first, before the configuration is read: SIGHUP, SIGUSR1 and
        // SIGUSR2 ignored until they are armed (docs/running.md), a closed pipe no end of the
        // daemon, a library that cannot be loaded (libyaml, libpsl) its one clear failure.
        SignalService.ignoreDefaultActions()
        signal(SIGPIPE, SIG_IGN)
        LibraryFailure.install()
        return PreparedStart(sources: start.sources, loaded: ConfigurationLoader.load(start.sources))
    }

    public static func main() async {
        let (asked, prepared) = prepared.withLockedValue { prepared in
            defer { prepared = (false, nil) }
            return prepared
        }
        if let start = asked ? prepared : readPlainStart() {
            // Not through `exit(withError:)`, which makes ArgumentParser render a message for it.
            Glibc.exit(await Daemon.run(sources: start.sources, demo: false, exec: nil, loaded: start.loaded))
        }
        let (rest, options) = Self.extractProviderOptions(Array(CommandLine.arguments.dropFirst()))
        providerOptions.withLockedValue { $0 = options }
        if rest.first == "exec" {
            await ExecCommand.main(Array(rest.dropFirst()))
            return
        }
        await main(rest)
    }

    /// The command line of a daemon that only serves, as a unit or a container runs it: nothing
    /// but `--config` and configuration keys, each once, as `--name value` or `--name=value`. Read
    /// without ArgumentParser, which took a quarter of start-up's CPU reflecting over a hundred
    /// options (docs/performance.md, "Start-up in detail"). Nil for anything else (a flag, `--help`,
    /// an unknown or repeated option, a value that starts with `-`): ArgumentParser reads those, the
    /// same way, and explains a mistake.
    static func plainKeyOptions(_ arguments: [String]) -> (config: String?, keys: [String: String])? {
        guard !arguments.isEmpty else { return (nil, [:]) }
        var config: String?
        var keys: [String: String] = [:]
        var seen = Set<String>()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let option: String
            let value: String
            // By bytes: the first `Character` operations of a process cost it their tables. A
            // non-ASCII byte after the `=` (a combining mark would join it) is ArgumentParser's.
            if let equals = argument.utf8.firstIndex(of: UInt8(ascii: "=")) {
                if let next = argument.utf8[argument.utf8.index(after: equals)...].first, next >= 0x80 { return nil }
                option = String(argument[..<equals])
                value = String(argument[argument.utf8.index(after: equals)...])
                index += 1
            } else {
                guard index + 1 < arguments.count else { return nil }
                option = argument
                value = arguments[index + 1]
                index += 2
            }
            guard seen.insert(option).inserted, let first = value.utf8.first, first != UInt8(ascii: "-") else { return nil }
            if option == "--config" {
                config = value
            } else if let spec = Keys.all.first(where: { $0.topLevel && $0.isOption(option) }) {
                keys[spec.name] = value
            } else {
                return nil
            }
        }
        return (config, keys)
    }

    /// The process's environment, read from `environ` as Foundation's `ProcessInfo` reads it (an
    /// entry without `=` skipped, the last of a name kept, bytes that are no UTF-8 repaired; split
    /// at the first `=` byte, where Foundation skips one a combining mark follows), which made its
    /// singleton first, 0.1 ms of a start's path. `entries`: for tests.
    static func processEnvironment(_ entries: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ) -> [String: String] {
        var environment: [String: String] = [:]
        var entry = entries
        while let variable = entry.pointee {
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(variable).assumingMemoryBound(to: UInt8.self), count: strlen(variable))
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                environment[String(decoding: bytes[..<equals], as: UTF8.self)] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
            }
            entry += 1
        }
        return environment
    }

    /// The arguments without the provider options, and those options by dotted key
    /// (`providers.pay.domainName`). An option without its value is left to ArgumentParser, which
    /// refuses it as unknown.
    static func extractProviderOptions(_ arguments: [String]) -> (rest: [String], options: [String: String]) {
        var rest: [String] = []
        var options: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { return (rest + arguments[index...], options) }
            if argument.hasPrefix("--providers.") {
                let option = argument.dropFirst(2)
                if let equals = option.firstIndex(of: "=") {
                    options[String(option[..<equals])] = String(option[option.index(after: equals)...])
                    index += 1
                    continue
                }
                if index + 1 < arguments.count {
                    options[String(option)] = arguments[index + 1]
                    index += 2
                    continue
                }
            }
            rest.append(argument)
            index += 1
        }
        return (rest, options)
    }

    public func run() async throws {
        if printConfigurationReference {
            print(ConfigurationReference.markdown)
            return
        }
        let sources = sources(environment: Self.processEnvironment())
        if once {
            throw ExitCode(await OneShot.run(sources, provider: provider, output: printed))
        }
        if checkConfig {
            let result = Daemon.checkConfiguration(sources)
            print(result.output, terminator: "")
            writeStandardError(result.errors)
            throw ExitCode(result.code)
        }
        throw ExitCode(await Daemon.run(sources: sources, demo: demo))
    }
}
