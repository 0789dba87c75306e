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
        "proxy.threads", 1...64, default: 1, help: "Event-loop threads of the proxy.", scope: .perProvider)
}
