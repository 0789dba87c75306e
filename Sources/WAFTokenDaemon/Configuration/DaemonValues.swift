import Configuration
import Logging
import WAFTokenCore

/// The daemon keys' values while they are read and checked, each against its `DaemonKey.Kind`.
struct DaemonValues {
    private let environment: [String: String]
    private var text: [DaemonKey: String] = [:]
    private var lists: [DaemonKey: [String]] = [:]

    init(environment: [String: String]) {
        self.environment = environment
    }

    mutating func read(_ key: DaemonKey, from chain: SourceChain, into issues: inout [WAFConfigurationIssue]) {
        switch chain.raw(key.rawValue, list: key.kind == .list) {
        case .failure(let issue):
            issues.append(issue)
        case .success((.list(let items), _)?):
            lists[key] = items
        case .success((.text(let value), let origin)?):
            check(value, for: key, origin: origin, into: &issues)
        case .success(nil):
            // systemd's StateDirectory= says where state belongs when nothing else does.
            let systemd = key == .stateDirectory ? environment["STATE_DIRECTORY"].flatMap { $0.split(separator: ":").first.map(String.init) } : nil
            if let value = key.defaultValue ?? systemd { check(value, for: key, origin: "the default", into: &issues) }
        }
    }

    private mutating func check(_ value: String, for key: DaemonKey, origin: String, into issues: inout [WAFConfigurationIssue]) {
        if let problem = Self.problem(with: value, for: key) {
            issues.append(WAFConfigurationIssue(key: key.rawValue, value: value.debugDescription, problem: "\(problem) (from \(origin))", allowed: key.allowed))
        } else {
            text[key] = value
        }
    }

    static func problem(with value: String, for key: DaemonKey) -> String? {
        switch key.kind {
        case .choice(let choices):
            return choices.contains(value) ? nil : "is not allowed"
        case .absolutePath:
            if !value.hasPrefix("/") { return "is not an absolute path" }
            return value.utf8.contains(0) ? "holds a NUL byte" : nil
        case .octalMode:
            guard let mode = octal(value) else { return "is not an octal mode" }
            return mode <= 0o777 ? nil : "is out of range"
        case .bool:
            return value == "true" || value == "false" ? nil : "is not a boolean"
        case .integer(let range):
            guard let number = Int(value) else { return "is not an integer" }
            return range.contains(number) ? nil : "is out of range"
        case .list:
            return nil
        }
    }

    /// "0660", "660" or "0o660".
    static func octal(_ text: String) -> UInt16? {
        let digits = text.hasPrefix("0o") ? String(text.dropFirst(2)) : text
        guard !digits.isEmpty, digits.count <= 4 else { return nil }
        return UInt16(digits, radix: 8)
    }

    /// Builds the configuration from checked values: every key with a default has a valid value
    /// here, so the conversions below cannot fail.
    func configuration(provider: WAFConfiguration) -> DaemonConfiguration {
        func value(_ key: DaemonKey) -> String { text[key] ?? key.defaultValue! }
        func number(_ key: DaemonKey) -> Int { Int(value(key))! }
        return DaemonConfiguration(
            provider: provider,
            lifecyclePlatform: WAFLifecycleProfile(rawValue: value(.lifecyclePlatform))!,
            socketPath: value(.socketPath),
            socketMode: Self.octal(value(.socketMode))!,
            allowedUsers: lists[.socketAllowedUsers] ?? [],
            allowedGroups: lists[.socketAllowedGroups] ?? [],
            idleTimeoutSeconds: number(.socketIdleTimeoutSec),
            requestTimeoutSeconds: number(.socketRequestTimeoutSec),
            socketThreads: number(.socketThreads),
            tokenServiceClient: value(.tokenServiceClient),
            tokenServiceTimeoutSeconds: number(.tokenServiceTimeoutSec),
            tokenServiceCAFile: text[.tokenServiceCAFile],
            refreshJitter: value(.refreshJitter) == "true",
            cookieSecure: value(.cookieSecure) == "true",
            tokenFile: text[.sinksTokenFile],
            cookieJar: text[.sinksCookieJar],
            stateDirectory: text[.stateDirectory],
            logLevel: Logger.Level(rawValue: value(.logLevel))!,
            waitForTokenBeforeReady: value(.readinessWaitForToken) == "true")
    }
}
