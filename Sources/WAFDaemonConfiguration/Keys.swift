import Logging
import WAFTokenCore

/// Every configuration key, declared once. Adding a key means adding it here and in the code
/// that reads it (`configuration[Keys.name]`); options, variables, `--help`, the man page,
/// `--check-config` and the README's table follow from this table.
public enum Keys {
    // MARK: The daemon's own keys

    public static let lifecyclePlatform = choice(
        "lifecycle.platform", WAFLifecycleProfile.ios,
        help: "Which lifecycle states are active: ios (foreground only) or android (unless closed).")
    public static let socketPath = path(
        "socket.path", kind: .socketPath, default: "/run/waf-tokend/token.sock", help: "The Unix socket the API is served on.", reload: false)
    public static let socketMode = mode("socket.mode", default: "0660", help: "The socket file's mode.", reload: false)
    public static let socketAllowedUsers = list(
        "socket.allowedUsers", help: "Users who may use the socket (names or uids); empty: anyone the mode lets in.")
    public static let socketAllowedGroups = list(
        "socket.allowedGroups", help: "Groups whose members may use the socket (names or gids).")
    public static let socketIdleTimeoutSec = integer(
        "socket.idleTimeoutSec", 1...3600, default: 60, help: "Close a connection idle this long between requests.")
    public static let socketRequestTimeoutSec = integer(
        "socket.requestTimeoutSec", 1...300, default: 10, help: "Answer 408 and close when a request takes longer than this to arrive.")
    public static let socketThreads = integer(
        "socket.threads", 1...64, default: 1, help: "Event-loop threads serving the socket; one answers over 100k requests a second.",
        reload: false)
    public static let tokenServiceClient = choice(
        "tokenService.client", ["ios", "android", "browser"], default: "ios",
        help: "The client name sent to the token service: ios, android or browser.")
    public static let tokenServiceTimeoutSec = integer(
        "tokenService.timeoutSec", 1...300, default: 10, help: "Timeout of each token-service request.")
    public static let tokenServiceCAFile = optionalPath(
        "tokenService.caFile", default: "the system trust store", help: "PEM file of CA certificates to trust instead of the system store.")
    public static let refreshJitter = flag(
        "refresh.jitter", default: true, help: "Shorten periodic and error-phase waits at random, never lengthen them (RET-7).")
    public static let cookieSecure = flag("cookie.secure", default: false, help: "Mark the aws-waf-token cookie Secure.")
    public static let sinksTokenFile = optionalPath(
        "sinks.tokenFile", help: "Write the bare token to this file on every new token (mode 0640).", scope: .perProvider)
    public static let sinksCookieJar = optionalPath(
        "sinks.cookieJar", help: "Write a curl cookie jar with the token cookie to this file on every new token.")
    public static let stateDirectory = optionalPath(
        "stateDirectory", default: "$STATE_DIRECTORY (systemd), else none",
        help: "Keep the last token here, so that a restarted daemon serves it at once.")
    public static let logLevel = choice("log.level", Logger.Level.info, help: "Least severe log level written.")
    public static let readinessWaitForToken = flag(
        "readiness.waitForToken", default: false, help: "Tell systemd READY=1 only once the first token is cached.", reload: false)

    public static let proxyListen = listenAddress(
        "proxy.listen", help: "Run the token-injecting proxy here: a Unix socket path or a loopback address with a port; unset: no proxy.")
    public static let proxyUpstream = url(
        "proxy.upstream", help: "The one URL the proxy forwards to: https (http for loopback), its host domainName, below it, or loopback.")
    public static let proxyTokenIn = choice(
        "proxy.tokenIn", ["cookie", "header"], default: "cookie",
        help: "How the proxy adds the token: the aws-waf-token cookie (COOK-1 paths) or the x-aws-waf-token header.", scope: .perProvider)
    public static let proxyReplayBufferBytes = integer(
        "proxy.replayBufferBytes", 0...16_777_216, default: 65536,
        help: "A request body up to this size is kept, so that a challenged request can be sent once more.", scope: .perProvider)
    public static let proxyTokenWaitSec = integer(
        "proxy.tokenWaitSec", 0...300, default: 5, help: "How long a request waits for a first token, or for the refresh a challenge asks for.",
        scope: .perProvider)
    public static let proxyUpstreamTimeoutSec = integer(
        "proxy.upstreamTimeoutSec", 1...3600, default: 30, help: "504 when the upstream sends nothing for this long (connect, answer or body).",
        scope: .perProvider)
    public static let proxyMode = optionalMode(
        "proxy.mode", default: "socket.mode", help: "The proxy's socket file mode, when it listens on a Unix socket.")
    public static let proxyAllowedUsers = optionalList(
        "proxy.allowedUsers", default: "the provider's allowedUsers (top level: socket.allowedUsers)",
        help: "Users who may use the proxy (names or uids).",
        scope: .perProvider)
    public static let proxyAllowedGroups = optionalList(
        "proxy.allowedGroups", default: "the provider's allowedGroups (top level: socket.allowedGroups)",
        help: "Groups whose members may use the proxy (names or gids).", scope: .perProvider)
    public static let proxyThreads = integer(
        "proxy.threads", 1...64, default: 1, help: "Event-loop threads of the proxy.", scope: .perProvider)

    /// A provider's own access lists (in its entry under `providers:`); the socket's by default.
    public static let providerAllowedUsers = optionalList(
        "allowedUsers", default: "socket.allowedUsers", help: "In a provider's entry: users who may use its token, cookie, events and refresh.",
        scope: .providerOnly)
    public static let providerAllowedGroups = optionalList(
        "allowedGroups", default: "socket.allowedGroups",
        help: "In a provider's entry: groups whose members may use its token, cookie, events and refresh.",
        scope: .providerOnly)

    /// Every key in the order the file, `--help` and the README show them: the SDK's first.
    public static let all: [KeySpec] =
        WAFConfigurationKey.allCases.map(provider) + [
            lifecyclePlatform.spec, socketPath.spec, socketMode.spec, socketAllowedUsers.spec, socketAllowedGroups.spec,
            socketIdleTimeoutSec.spec, socketRequestTimeoutSec.spec, socketThreads.spec, tokenServiceClient.spec,
            tokenServiceTimeoutSec.spec, tokenServiceCAFile.spec, refreshJitter.spec, cookieSecure.spec, sinksTokenFile.spec,
            sinksCookieJar.spec, stateDirectory.spec, logLevel.spec, readinessWaitForToken.spec, proxyListen.spec, proxyUpstream.spec,
            proxyTokenIn.spec, proxyReplayBufferBytes.spec, proxyTokenWaitSec.spec, proxyUpstreamTimeoutSec.spec, proxyMode.spec,
            proxyAllowedUsers.spec, proxyAllowedGroups.spec, proxyThreads.spec, providerAllowedUsers.spec, providerAllowedGroups.spec,
        ]

    /// The keys a provider's entry may hold, by name.
    package static let perProviderByName = byName.filter { $0.value.perProvider }

    /// The keys by name.
    package static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    // MARK: Declarations

    package static func provider(_ key: WAFConfigurationKey) -> KeySpec {
        let defaults: [WAFConfigurationKey: String] = [
            .applicationIntegrationUrl: "required", .domainName: "required", .backgroundRefreshEnabled: "true",
            .maxErrorTokenRefreshDelayMsec: "5000", .maxRetryCount: "5 with background refresh, else 3",
            .setTokenCookie: "true", .tokenCookiePath: "/", .tokenRefreshDelaySec: "300 (ranges: current: 88)", .ranges: "seed",
        ]
        return KeySpec(
            name: key.rawValue, kind: .provider(key), defaultValue: nil, defaultDescription: defaults[key], help: key.help,
            appliesOnReload: true, scope: .inherited)
    }

    package static func path(
        _ name: String, kind: KeySpec.Kind = .absolutePath, default value: String, help: String, reload: Bool = true
    ) -> SettingKey<String> {
        SettingKey(spec: .init(name: name, kind: kind, defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: reload)) {
            if case .text(let text)? = $0 { text } else { value }
        }
    }

    package static func optionalPath(
        _ name: String, default description: String? = nil, help: String, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<String?> {
        SettingKey(
            spec: .init(
                name: name, kind: .absolutePath, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .text(let text)? = $0 { text } else { nil }
        }
    }

    package static func mode(_ name: String, default value: String, help: String, reload: Bool = true) -> SettingKey<UInt16> {
        SettingKey(spec: .init(name: name, kind: .octalMode, defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: reload)) {
            if case .mode(let mode)? = $0 { mode } else { UInt16(value, radix: 8)! }
        }
    }

    package static func optionalMode(_ name: String, default description: String, help: String) -> SettingKey<UInt16?> {
        SettingKey(
            spec: .init(
                name: name, kind: .octalMode, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true,
                scope: .perProvider)
        ) {
            if case .mode(let mode)? = $0 { mode } else { nil }
        }
    }

    /// A list whose absence means something else than an empty list (another key's value).
    package static func optionalList(_ name: String, default description: String, help: String, scope: KeySpec.Scope) -> SettingKey<[String]?> {
        SettingKey(
            spec: .init(name: name, kind: .list, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .list(let items)? = $0 { items } else { nil }
        }
    }

    package static func listenAddress(_ name: String, help: String) -> SettingKey<ListenAddress?> {
        SettingKey(
            spec: .init(
                name: name, kind: .listenAddress, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true, scope: .perProvider)
        ) {
            if case .text(let text)? = $0 { ListenAddress(text) } else { nil }
        }
    }

    package static func url(_ name: String, help: String) -> SettingKey<String?> {
        SettingKey(
            spec: .init(name: name, kind: .url, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true, scope: .perProvider)
        ) {
            if case .text(let text)? = $0 { text } else { nil }
        }
    }

    package static func list(_ name: String, help: String) -> SettingKey<[String]> {
        SettingKey(spec: .init(name: name, kind: .list, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true)) {
            if case .list(let items)? = $0 { items } else { [] }
        }
    }

    package static func integer(
        _ name: String, _ range: ClosedRange<Int>, default value: Int, help: String, reload: Bool = true, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<Int> {
        SettingKey(
            spec: .init(
                name: name, kind: .integer(range), defaultValue: String(value), defaultDescription: nil, help: help, appliesOnReload: reload,
                scope: scope)
        ) {
            if case .int(let number)? = $0 { number } else { value }
        }
    }

    package static func flag(_ name: String, default value: Bool, help: String, reload: Bool = true) -> SettingKey<Bool> {
        SettingKey(spec: .init(name: name, kind: .bool, defaultValue: String(value), defaultDescription: nil, help: help, appliesOnReload: reload)) {
            if case .bool(let flag)? = $0 { flag } else { value }
        }
    }

    package static func choice(
        _ name: String, _ values: [String], default value: String, help: String, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<String> {
        SettingKey(
            spec: .init(
                name: name, kind: .choice(values), defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .text(let text)? = $0 { text } else { value }
        }
    }

    package static func choice<Value: RawRepresentable & CaseIterable & Sendable>(_ name: String, _ value: Value, help: String) -> SettingKey<Value>
    where Value.RawValue == String {
        let spec = KeySpec(
            name: name, kind: .choice(Value.allCases.map(\.rawValue)), defaultValue: value.rawValue, defaultDescription: nil, help: help,
            appliesOnReload: true)
        return SettingKey(spec: spec) {
            if case .text(let text)? = $0, let parsed = Value(rawValue: text) { parsed } else { value }
        }
    }
}
