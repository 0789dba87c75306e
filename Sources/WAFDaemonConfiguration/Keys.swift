import Logging
import WAFTokenCore

/// Every configuration key, declared once: here, or beside its group (`Keys+Listeners`,
/// `Keys+Delivery`, the proxy's in `ProxyConfiguration`), each group with the list `all` joins. Adding
/// a key means its declaration, its name in its group's list, and the code that reads it
/// (`configuration[Keys.name]`); options, variables, `--help`, the man page, `--check-config` and
/// docs/configuration.md's table follow (docs/architecture.md, "Where a change goes").
public enum Keys {
    // MARK: The daemon's own keys

    public static let lifecyclePlatform = choice(
        "lifecycle.platform", WAFLifecycleProfile.ios,
        help: "Which lifecycle states are active: ios (foreground only) or android (unless closed).")
    public static let lifecycleAllowedUsers = list(
        "lifecycle.allowedUsers", help: "Users who may change the app's lifecycle over the socket; empty: those allowed for every provider.")
    public static let lifecycleAllowedGroups = list(
        "lifecycle.allowedGroups", help: "Groups whose members may change the app's lifecycle over the socket.")
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
    public static let socketMaxConnections = integer(
        "socket.maxConnections", 1...1_000_000, default: 4096,
        help: "At most this many connections on each listener (socket, proxies, auth, metrics); more are closed at once.")
    public static let socketMaxConnectionsPerUser = integer(
        "socket.maxConnectionsPerUser", 1...1_000_000, default: 1024,
        help: "At most this many connections from one uid on each listener; more are closed at once.")
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
    public static let refreshMinForcedIntervalSec = integer(
        "refresh.minForcedIntervalSec", 0...300, default: 5,
        help: "A forced refresh (POST /v1/refresh, a proxy's challenge) fetches at most once in this many seconds per provider; 0: every time.")
    public static let refreshJitter = flag(
        "refresh.jitter", default: true, help: "Shorten periodic and error-phase waits at random, never lengthen them (RET-7).")
    public static let cookieSecure = flag("cookie.secure", default: false, help: "Mark the aws-waf-token cookie Secure.")
    public static let sinksTokenFile = optionalPath(
        "sinks.tokenFile", help: "Write the bare token to this file on every new token (mode 0640).", scope: .perProvider)
    public static let sinksCookieJar = optionalPath(
        "sinks.cookieJar",
        help:
            "Write a curl cookie jar with the token cookie to this file on every new token (mode 0640); one jar holds only providers whose readers are the same.",
        scope: .inherited)
    public static let sinksGroup = optionalGroup(
        "sinks.group", default: "the daemon's group",
        help: "The group that owns the token file and the cookie jar (mode 0640): the tenant's group, so that it reads its own files and no other's.",
        scope: .inherited)
    public static let stateDirectory = optionalPath(
        "stateDirectory", default: "$STATE_DIRECTORY (systemd), else none",
        help: "Keep the last token here, so that a restarted daemon serves it at once.")
    public static let logLevel = choice("log.level", Logger.Level.info, help: "Least severe log level written.")
    public static let limitsBufferedBytes = integer(
        "limits.bufferedBytes", 1_048_576...1_073_741_824, default: 16_777_216,
        help:
            "What connections may hold of their peers' bytes (bodies kept for a replay), all together; one uid at most a quarter. Past it a body streams instead.",
        reload: false)
    public static let readinessWaitForToken = flag(
        "readiness.waitForToken", default: false, help: "Tell systemd READY=1 only once the first token is cached.", reload: false)

    /// A provider's own access lists (in its entry under `providers:`); the socket's by default.
    public static let providerAllowedUsers = optionalList(
        "allowedUsers", default: "socket.allowedUsers", help: "In a provider's entry: users who may use its token, cookie, events and refresh.",
        scope: .providerOnly)
    public static let providerAllowedGroups = optionalList(
        "allowedGroups", default: "socket.allowedGroups",
        help: "In a provider's entry: groups whose members may use its token, cookie, events and refresh.",
        scope: .providerOnly)

    /// Every key in the order the file, `--help` and docs/configuration.md show them: the SDK's first.
    public static let all: [KeySpec] =
        WAFConfigurationKey.allCases.map(provider) + [
            lifecyclePlatform.spec, lifecycleAllowedUsers.spec, lifecycleAllowedGroups.spec, socketPath.spec, socketMode.spec,
            socketAllowedUsers.spec, socketAllowedGroups.spec, socketIdleTimeoutSec.spec, socketRequestTimeoutSec.spec,
            socketMaxConnections.spec, socketMaxConnectionsPerUser.spec, socketThreads.spec, tokenServiceClient.spec,
            tokenServiceTimeoutSec.spec, tokenServiceCAFile.spec, refreshMinForcedIntervalSec.spec, refreshJitter.spec, cookieSecure.spec,
            sinksTokenFile.spec, sinksCookieJar.spec, sinksGroup.spec, stateDirectory.spec, logLevel.spec, limitsBufferedBytes.spec,
            readinessWaitForToken.spec, providerAllowedUsers.spec, providerAllowedGroups.spec,
        ] + proxyKeys + listenerKeys + deliveryKeys + egressKeys

    /// The keys a provider's entry may hold, by name.
    package static let perProviderByName = byName.filter { $0.value.perProvider }

    /// The keys by name.
    package static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
}
