/// The listeners beside the socket that the tools operators run can reach: Prometheus and probes
/// (`metrics.listen`), forward authentication for nginx, Caddy, Traefik and Envoy (`auth.listen`).
extension Keys {
    public static let metricsListen = tcpAddress(
        "metrics.listen",
        help: "Serve /metrics, /healthz and /readyz (never a token) on this address with a port, any interface (0.0.0.0:9464 in a pod); unset: off.")
    public static let authListen = loopbackAddress(
        "auth.listen",
        help:
            "Serve GET /v1/auth (forward authentication) on this loopback address with a port; needs auth.allowedUsers or auth.allowedGroups; unset: the socket only."
    )
    public static let authAllowedUsers = list(
        "auth.allowedUsers", help: "Users (of the proxy that asks, found by its TCP connection) who may use auth.listen.")
    public static let authAllowedGroups = list(
        "auth.allowedGroups", help: "Groups whose members may use auth.listen.")
    public static let authSelectByForwardedHost = flag(
        "auth.selectByForwardedHost", default: false,
        help:
            "Let X-Forwarded-Host choose the provider of a GET /v1/auth without a selector; off: the auth URL's ?provider= or ?domain=, else default (a client can write that header)."
    )
    public static let authTokenWaitSec = integer(
        "auth.tokenWaitSec", 0...300, default: 5, help: "How long GET /v1/auth waits for a first token before answering 503 with Retry-After.")

    /// In the order `--help` and the reference show them.
    static let listenerKeys: [KeySpec] = [
        metricsListen.spec, authListen.spec, authAllowedUsers.spec, authAllowedGroups.spec, authSelectByForwardedHost.spec, authTokenWaitSec.spec,
    ]
}
