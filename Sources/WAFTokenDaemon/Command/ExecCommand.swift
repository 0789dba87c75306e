import ArgumentParser
import WAFDaemonConfiguration
import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension SupervisorMachine.OnToken: ExpressibleByArgument {}

/// `waf-tokend exec [OPTIONS] -- CMD ARGS...`: the providers of the configuration in this process,
/// and CMD supervised with the token in a file (docs/delivery.md).
struct ExecCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "waf-tokend exec",
        abstract: "Runs CMD with WAF_TOKEN_FILE naming a file that holds the token, kept fresh; tells CMD of each new token.",
        discussion: """
            The configuration is the daemon's (--config, WAF_TOKEND_* variables, key options). CMD starts once the \
            provider's first token is in the file: its sinks.tokenFile, --token-file, else a 0600 file in a private \
            temporary directory removed at exit. SIGTERM, SIGINT and SIGHUP go on to CMD. Exit: CMD's status (128+N \
            for signal N), 69 when no first token comes within --first-token-timeout, 78 for a bad configuration. \
            No socket is served unless socket.path is given.
            """)

    @Option(help: "The YAML configuration file (default: /etc/waf-tokend/waf-tokend.yaml, if it exists).")
    var config: String?

    @Option(help: "The provider whose token CMD gets (default: the top-level one, or the only one).")
    var provider: String?

    @Option(help: "Where the token is written (default: the provider's sinks.tokenFile, else a private temporary file).")
    var tokenFile: String?

    @Option(help: "What a new token does to CMD: hup (SIGHUP), restart (SIGTERM, then CMD again), none.")
    var onToken: SupervisorMachine.OnToken = .none

    @Option(help: "Seconds to wait for the first token before giving up with 69.")
    var firstTokenTimeout: Int = 30

    @OptionGroup(title: "Configuration keys") var keys: KeyOptions

    @Argument(parsing: .postTerminator, help: "The command and its arguments, after --.")
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else { throw ValidationError("give the command after --: waf-tokend exec -- CMD ARGS...") }
        guard firstTokenTimeout > 0 else { throw ValidationError("--first-token-timeout must be at least 1") }
    }

    func run() async throws {
        // First: a SIGTERM from now on is kept for the supervisor (ForwardedSignals). Every
        // default action goes before any source is armed (signal() would replace its handler).
        SignalService.ignoreDefaultActions()
        let signals = ForwardedSignals()
        let providers = WAFTokendCommand.providerOptions.withLockedValue { $0 }
        let sources = ConfigurationSources(
            commandLine: keys.values.merging(providers) { $1 }, environment: WAFTokendCommand.processEnvironment(), file: config)
        throw ExitCode(await ExecMode.run(sources, options: self, signals: signals))
    }
}

/// What `exec` adds to the daemon's start: the provider chosen, its token file, the supervisor.
enum ExecMode {
    static func run(_ sources: ConfigurationSources, options: ExecCommand, signals: ForwardedSignals) async -> Int32 {
        // Before the private directory is made, which a library missing mid-run must not leave.
        LibraryFailure.install()
        let configuration: DaemonConfiguration
        switch ConfigurationLoader.load(sources) {
        case .failure(let error):
            writeStandardError("waf-tokend: invalid configuration:\n" + error.issues.map { "  \($0.description)\n" }.joined())
            return DaemonFailure.Code.configuration.rawValue
        case .success(let loaded):
            configuration = loaded
        }
        let chosen =
            options.provider.map { name in configuration.providers.first { $0.name == name } }
            ?? (configuration.defaultProvider ?? (configuration.providers.count == 1 ? configuration.providers.first : nil))
        guard let chosen else {
            let names = configuration.providers.map(\.name).joined(separator: ", ")
            writeStandardError(
                "waf-tokend: \(options.provider.map { "no provider named \($0)" } ?? "several providers: choose one with --provider") (providers: \(names))\n"
            )
            return DaemonFailure.Code.configuration.rawValue
        }
        // The file the child reads: given, the provider's own, else a private temporary one.
        var sources = sources
        var temporary: String?
        let tokenFile: String
        if let given = options.tokenFile ?? chosen[Keys.sinksTokenFile] {
            tokenFile = given
        } else {
            var template = Array(((ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/waf-tokend-exec-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else {
                writeStandardError("waf-tokend: cannot make a private directory for the token file: \(String(cString: strerror(errno)))\n")
                return DaemonFailure.Code.osError.rawValue
            }
            temporary = String(cString: made)
            tokenFile = temporary! + "/token"
            guard LibraryFailure.removeOnFailure(directory: temporary!) else {
                writeStandardError("waf-tokend: cannot open its private directory \(temporary!): \(String(cString: strerror(errno)))\n")
                rmdir(temporary!)
                return DaemonFailure.Code.osError.rawValue
            }
        }
        if options.tokenFile != nil || temporary != nil {
            sources.commandLine[chosen.isDefault ? "sinks.tokenFile" : "providers.\(chosen.name).sinks.tokenFile"] = tokenFile
        }
        let settings = ExecService.Settings(
            provider: chosen.name, tokenFile: tokenFile, privateFile: temporary != nil, onToken: options.onToken,
            firstTokenTimeout: .seconds(options.firstTokenTimeout),
            command: options.command, signals: signals)
        let code = await Daemon.run(sources: sources, demo: false, exec: settings)
        if let temporary {
            unlink(tokenFile)
            rmdir(temporary)
        }
        return code
    }
}
