import WAFHTTPWire
import WAFTokenCore

/// The token-injecting proxy's keys, each a provider's own (docs/proxy.md).
extension Keys {
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
        "proxy.threads", 1...64, default: 1, help: "Event-loop threads of the proxy.", reload: false,
        scope: .perProvider)

    /// In the order `--help` and the reference show them.
    static let proxyKeys: [KeySpec] = [
        proxyListen.spec, proxyUpstream.spec, proxyTokenIn.spec, proxyReplayBufferBytes.spec, proxyTokenWaitSec.spec, proxyUpstreamTimeoutSec.spec,
        proxyMode.spec, proxyAllowedUsers.spec, proxyAllowedGroups.spec, proxyThreads.spec,
    ]
}

/// A provider's proxy keys, checked together: nil when its `proxy.listen` is unset (no proxy).
/// Read here, where the keys are; the composition root makes the proxy's own settings of them
/// (`WAFTokenProxy.ProxySettings`): no module but this one and the root reads `Keys`.
package struct ProxyConfiguration: Sendable, Equatable {
    package enum TokenPlacement: String, Sendable {
        case cookie, header
    }

    /// The identity the route's tokens must be fetched for (TENANT-2).
    package var identity: WAFTokenIdentity
    package var listen: ListenAddress
    package var mode: UInt16
    package var upstream: UpstreamTarget
    package var tokenIn: TokenPlacement
    package var replayBufferBytes: Int
    package var tokenWait: Duration
    package var upstreamTimeout: Duration
    /// Who may take the provider's token (`DaemonConfiguration.readers(of:)`): the one definition.
    package var readers: AccessLists
    /// `proxy.allowedUsers`/`proxy.allowedGroups`, which narrow the readers for this proxy.
    package var narrowing: AccessLists?
    package var threads: Int
    /// `tokenService.caFile`: an https upstream is checked against the same trust as the token service.
    package var caFile: String?

    /// The first provider's proxy (a single-provider configuration's).
    package init?(_ daemon: DaemonConfiguration) {
        self.init(daemon.providers[0], daemon)
    }

    package init?(_ provider: ProviderConfiguration, _ daemon: DaemonConfiguration) {
        guard let listen = provider[Keys.proxyListen], let text = provider[Keys.proxyUpstream],
            case .success(let upstream) = UpstreamTarget.parse(text, domainName: provider.domainName)
        else { return nil }
        identity = provider.identity
        self.listen = listen
        self.upstream = upstream
        mode = provider[Keys.proxyMode] ?? daemon[Keys.socketMode]
        tokenIn = TokenPlacement(rawValue: provider[Keys.proxyTokenIn]) ?? .cookie
        replayBufferBytes = provider[Keys.proxyReplayBufferBytes]
        tokenWait = .seconds(provider[Keys.proxyTokenWaitSec])
        upstreamTimeout = .seconds(provider[Keys.proxyUpstreamTimeoutSec])
        // The provider's readers, which the proxy's own lists may narrow and never widen (TENANT-10).
        readers = daemon.readers(of: provider)
        narrowing = daemon.proxyNarrowing(of: provider)
        threads = provider[Keys.proxyThreads]
        caFile = daemon[Keys.tokenServiceCAFile]
    }
}
