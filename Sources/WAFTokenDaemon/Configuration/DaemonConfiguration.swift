import Logging
import WAFTokenCore

/// Everything `waf-tokend` runs with: the provider's configuration and the daemon's own settings,
/// all validated.
public struct DaemonConfiguration: Sendable {
    public var provider: WAFConfiguration
    public var lifecyclePlatform: WAFLifecycleProfile
    public var socketPath: String
    public var socketMode: UInt16
    public var allowedUsers: [String]
    public var allowedGroups: [String]
    public var idleTimeoutSeconds: Int
    public var requestTimeoutSeconds: Int
    public var socketThreads: Int
    public var tokenServiceClient: String
    public var tokenServiceTimeoutSeconds: Int
    public var tokenServiceCAFile: String?
    public var refreshJitter: Bool
    public var cookieSecure: Bool
    public var tokenFile: String?
    public var cookieJar: String?
    public var stateDirectory: String?
    public var logLevel: Logger.Level
    public var waitForTokenBeforeReady: Bool

    /// Every key with its effective value, as `--check-config` prints it (YAML), "" when unset.
    /// Nothing in the configuration is secret: paths, names and numbers only.
    public var effectiveSettings: [(key: String, value: String)] {
        let provider = WAFConfigurationKey.allCases.map { key in
            (key.rawValue, self.provider.settings[key.rawValue].map(Self.render) ?? "")
        }
        let own: [(String, String)] = DaemonKey.allCases.map { key in
            let value: String
            switch key {
            case .lifecyclePlatform: value = lifecyclePlatform.rawValue
            case .socketPath: value = socketPath
            case .socketMode: value = "\"0" + String(socketMode, radix: 8) + "\""
            case .socketAllowedUsers: value = "[" + allowedUsers.joined(separator: ", ") + "]"
            case .socketAllowedGroups: value = "[" + allowedGroups.joined(separator: ", ") + "]"
            case .socketIdleTimeoutSec: value = String(idleTimeoutSeconds)
            case .socketRequestTimeoutSec: value = String(requestTimeoutSeconds)
            case .socketThreads: value = String(socketThreads)
            case .tokenServiceClient: value = tokenServiceClient
            case .tokenServiceTimeoutSec: value = String(tokenServiceTimeoutSeconds)
            case .tokenServiceCAFile: value = tokenServiceCAFile ?? ""
            case .refreshJitter: value = String(refreshJitter)
            case .cookieSecure: value = String(cookieSecure)
            case .sinksTokenFile: value = tokenFile ?? ""
            case .sinksCookieJar: value = cookieJar ?? ""
            case .stateDirectory: value = stateDirectory ?? ""
            case .logLevel: value = logLevel.rawValue
            case .readinessWaitForToken: value = String(waitForTokenBeforeReady)
            }
            return (key.rawValue, value)
        }
        return provider + own
    }

    /// The effective configuration as a YAML document, sections nested, unset keys as comments,
    /// so that it reads back as the same configuration.
    public var effectiveYAML: String {
        var lines: [String] = []
        var section: String?
        for (key, value) in effectiveSettings {
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            let name = parts.count == 2 ? parts[1] : key
            if parts.count == 2, section != parts[0] {
                lines.append("\(parts[0]):")
                section = parts[0]
            } else if parts.count == 1 {
                section = nil
            }
            let indent = parts.count == 2 ? "  " : ""
            lines.append(value.isEmpty ? "\(indent)# \(name): (not set)" : "\(indent)\(name): \(value)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func render(_ value: WAFSettingValue) -> String {
        switch value {
        case .string(let text), .text(let text): text
        case .int(let number): String(number)
        case .bool(let flag): String(flag)
        case .double(let number): String(number)
        }
    }
}
