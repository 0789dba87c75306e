import WAFTokenCore

/// The daemon's own configuration keys (SIDECAR.md), with the rules for each. The provider's keys
/// are `WAFConfigurationKey`; together they are every key of the configuration file.
public enum DaemonKey: String, CaseIterable, Sendable {
    case lifecyclePlatform = "lifecycle.platform"
    case socketPath = "socket.path"
    case socketMode = "socket.mode"
    case socketAllowedUsers = "socket.allowedUsers"
    case socketAllowedGroups = "socket.allowedGroups"
    case socketIdleTimeoutSec = "socket.idleTimeoutSec"
    case socketRequestTimeoutSec = "socket.requestTimeoutSec"
    case socketThreads = "socket.threads"
    case tokenServiceClient = "tokenService.client"
    case tokenServiceTimeoutSec = "tokenService.timeoutSec"
    case tokenServiceCAFile = "tokenService.caFile"
    case refreshJitter = "refresh.jitter"
    case cookieSecure = "cookie.secure"
    case sinksTokenFile = "sinks.tokenFile"
    case sinksCookieJar = "sinks.cookieJar"
    case stateDirectory = "stateDirectory"
    case logLevel = "log.level"
    case readinessWaitForToken = "readiness.waitForToken"

    public enum Kind: Sendable, Equatable {
        case choice([String])
        case absolutePath
        case octalMode
        case list
        case bool
        case integer(ClosedRange<Int>)
    }

    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    public var kind: Kind {
        switch self {
        case .lifecyclePlatform: .choice(WAFLifecycleProfile.allCases.map(\.rawValue))
        case .socketPath, .tokenServiceCAFile, .sinksTokenFile, .sinksCookieJar, .stateDirectory: .absolutePath
        case .socketMode: .octalMode
        case .socketAllowedUsers, .socketAllowedGroups: .list
        case .socketIdleTimeoutSec: .integer(1...3600)
        case .socketRequestTimeoutSec: .integer(1...300)
        case .socketThreads: .integer(1...64)
        case .tokenServiceClient: .choice(["ios", "android", "browser"])
        case .tokenServiceTimeoutSec: .integer(1...300)
        case .refreshJitter, .cookieSecure, .readinessWaitForToken: .bool
        case .logLevel: .choice(Self.logLevels)
        }
    }

    /// The default, as written in the file; nil when unset means "off" or "none".
    public var defaultValue: String? {
        switch self {
        case .lifecyclePlatform: "ios"
        case .socketPath: "/run/waf-tokend/token.sock"
        case .socketMode: "0660"
        case .socketIdleTimeoutSec: "60"
        case .socketRequestTimeoutSec: "10"
        case .socketThreads: "1"
        case .tokenServiceClient: "ios"
        case .tokenServiceTimeoutSec: "10"
        case .refreshJitter: "true"
        case .cookieSecure: "false"
        case .logLevel: "info"
        case .readinessWaitForToken: "false"
        case .socketAllowedUsers, .socketAllowedGroups, .tokenServiceCAFile, .sinksTokenFile, .sinksCookieJar, .stateDirectory:
            nil
        }
    }

    public var allowed: String {
        switch kind {
        case .choice(let values): "one of " + values.joined(separator: ", ")
        case .absolutePath: "an absolute path"
        case .octalMode: "an octal file mode such as \"0660\" (0000…0777)"
        case .list: "a list of user or group names or numeric ids"
        case .bool: "true or false"
        case .integer(let range): "an integer \(range.lowerBound)…\(range.upperBound)"
        }
    }

    /// One line for `--help`, `--check-config` and the README.
    public var help: String {
        switch self {
        case .lifecyclePlatform: "Which lifecycle states are active: ios (foreground only) or android (unless closed)."
        case .socketPath: "The Unix socket the API is served on."
        case .socketMode: "The socket file's mode."
        case .socketAllowedUsers: "Users who may use the socket (names or uids); empty: anyone the mode lets in."
        case .socketAllowedGroups: "Groups whose members may use the socket (names or gids)."
        case .socketIdleTimeoutSec: "Close a connection idle this long between requests."
        case .socketRequestTimeoutSec: "Answer 408 and close when a request takes longer than this to arrive."
        case .socketThreads: "Event-loop threads serving the socket; one answers over 100k requests a second."
        case .tokenServiceClient: "The client name sent to the token service: ios, android or browser."
        case .tokenServiceTimeoutSec: "Timeout of each token-service request."
        case .tokenServiceCAFile: "PEM file of CA certificates to trust instead of the system store."
        case .refreshJitter: "Shorten periodic and error-phase waits at random (RET-7)."
        case .cookieSecure: "Mark the aws-waf-token cookie Secure."
        case .sinksTokenFile: "Write the bare token to this file on every new token (mode 0640)."
        case .sinksCookieJar: "Write a curl cookie jar with the token cookie to this file on every new token."
        case .stateDirectory: "Keep the last token here, so that a restarted daemon serves it at once (default: $STATE_DIRECTORY)."
        case .logLevel: "Least severe log level written."
        case .readinessWaitForToken: "Tell systemd READY=1 only once the first token is cached."
        }
    }

    /// `WAF_TOKEND_` + the key in upper snake case.
    public var environmentName: String { Self.environmentName(rawValue) }

    /// `--` + the key in kebab case.
    public var optionName: String { Self.optionName(rawValue) }

    public static func environmentName(_ key: String) -> String {
        "WAF_TOKEND_" + words(key).map { $0.uppercased() }.joined(separator: "_")
    }

    public static func optionName(_ key: String) -> String {
        "--" + words(key).joined(separator: "-")
    }

    /// The words of a dotted camel-case key: `tokenService.caFile` → token, service, ca, file.
    static func words(_ key: String) -> [String] {
        var words: [String] = []
        for component in key.split(separator: ".") {
            var word = ""
            for character in component {
                if character.isUppercase, let last = word.last, last.isLowercase {
                    words.append(word)
                    word = ""
                }
                word.append(Character(character.lowercased()))
            }
            words.append(word)
        }
        return words
    }
}
