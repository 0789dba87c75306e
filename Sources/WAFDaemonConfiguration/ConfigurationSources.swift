/// Where configuration comes from, in order of precedence: command line, environment, file,
/// defaults (docs/configuration.md).
public struct ConfigurationSources: Sendable {
    public static let defaultFile = "/etc/waf-tokend/waf-tokend.yaml"

    /// Values from command-line options, by key name.
    public var commandLine: [String: String]
    public var environment: [String: String]
    /// A file given with `--config` must exist; the default one may be absent.
    public var file: String?
    /// Values below the file that the daemon supplies itself (demo mode), by key name.
    public var fallbacks: [String: String]

    public init(commandLine: [String: String] = [:], environment: [String: String] = [:], file: String? = nil, fallbacks: [String: String] = [:]) {
        self.commandLine = commandLine
        self.environment = environment
        self.file = file
        self.fallbacks = fallbacks
    }

    public var filePath: String { file ?? Self.defaultFile }
}
