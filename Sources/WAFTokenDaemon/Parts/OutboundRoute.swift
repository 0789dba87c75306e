import AsyncHTTPClient
import WAFChallenge
import WAFDaemonConfiguration

/// How one of a provider's requests leaves the host (EGRESS-1), made ready for a client: directly,
/// or through a forward proxy with the credentials read from `egress.proxyCredentialsFile`. The
/// credentials are in no description, log line or label.
struct OutboundRoute: Hashable, Sendable {
    /// The metrics' `egress` label: `direct`, or the proxy's host and port.
    let label: String
    /// What the start line and `--check-config` say: the route and why.
    let summary: String
    let proxy: Proxy?

    struct Proxy: Hashable, Sendable {
        let host: String
        let port: Int
        /// `user:password`, from the credentials file.
        let credentials: String?

        /// AsyncHTTPClient's form (the token service client, the canary).
        var client: HTTPClient.Configuration.Proxy {
            .server(host: host, port: port, authorization: credentials.map { .basic(credentials: Base64.encode(Array($0.utf8))) })
        }

        /// `Proxy-Authorization`'s value, for the proxy's own `CONNECT`s.
        var authorization: String? { credentials.map { "Basic " + Base64.encode(Array($0.utf8)) } }
    }

    static let direct = OutboundRoute(label: "direct", summary: "direct", proxy: nil)

    /// `provider`'s route to `url`: its egress, and for a proxy the credentials of the provider's
    /// `egress.proxyCredentialsFile` (its own, else the top level's).
    static func of(_ provider: ProviderConfiguration, to url: String, in configuration: DaemonConfiguration) throws(DaemonFailure) -> OutboundRoute {
        let egress: Egress
        switch configuration.egress(of: provider, for: url) {
        case .success(let resolved): egress = resolved
        case .failure(let problem): throw DaemonFailure(.configuration, "egress.proxy: \(problem.description)")
        }
        guard case .proxy(let host, let port) = egress.route else {
            return OutboundRoute(label: egress.label, summary: egress.description, proxy: nil)
        }
        let credentials = try configuration.inherited(Keys.egressProxyCredentialsFile, for: provider).map { path throws(DaemonFailure) in
            try Self.credentials(at: path)
        }
        return OutboundRoute(label: egress.label, summary: egress.description, proxy: Proxy(host: host, port: port, credentials: credentials))
    }

    /// The `user:password` the file holds (its first line), refused when others may read it.
    static func credentials(at path: String) throws(DaemonFailure) -> String {
        switch ProxyCredentials.read(path) {
        case .success(let credentials): return credentials
        case .failure(let problem): throw DaemonFailure(.configuration, "egress.proxyCredentialsFile: \(path) \(problem.description)")
        }
    }
}
