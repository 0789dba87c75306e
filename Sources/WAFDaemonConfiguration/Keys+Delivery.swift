import WAFDelivery

/// Following the tokens out: telling programs that cannot change of a new token
/// (docs/delivery.md), and proving that the web ACL still accepts it (docs/canary.md).
extension Keys {
    public static let sinksOnToken = actions(
        "sinks.onToken",
        help:
            "What to do once the sinks hold a new token, in order: {signal: {pidFile: PATH, name: HUP}}, {reload: UNIT} (systemd, over D-Bus) or {run: [PROGRAM, ARGS...]} (the token on stdin only)."
    )
    public static let sinksOnTokenUsers = optionalList(
        "sinks.onTokenUsers", default: "none: the daemon's own user only",
        help:
            "Besides the daemon's own user, whose processes this provider's signal actions may reach (needs CAP_KILL from the unit); each provider's own.",
        scope: .perProvider)
    public static let sinksOnTokenTimeoutSec = integer(
        "sinks.onTokenTimeoutSec", 1...3600, default: 10, help: "A run action still running after this long is killed (SIGKILL) and counts as failed."
    )

    public static let canaryURL = url(
        "canary.url",
        help:
            "A URL of the protected API the daemon requests with the token, to prove the web ACL still accepts it: https, or http to loopback; its host domainName, below it, or loopback. Unset: no canary."
    )
    public static let canaryIntervalSec = integer(
        "canary.intervalSec", 10...3600, default: 60, help: "How often the canary asks, while it is accepted.", scope: .perProvider)
    public static let canaryMethod = choice(
        "canary.method", ["GET", "HEAD"], default: "GET", help: "The canary's request method.", scope: .perProvider)
    public static let canaryAffectsReadiness = flag(
        "canary.affectsReadiness", default: true, help: "While the canary is rejected, /readyz answers 503 for the provider.", scope: .perProvider)

    /// In the order `--help` and the reference show them.
    static let deliveryKeys: [KeySpec] = [
        sinksOnToken.spec, sinksOnTokenUsers.spec, sinksOnTokenTimeoutSec.spec, canaryURL.spec, canaryIntervalSec.spec, canaryMethod.spec,
        canaryAffectsReadiness.spec,
    ]
}
