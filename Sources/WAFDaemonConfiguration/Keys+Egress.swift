/// How a provider's requests leave the host (docs/egress.md): the token service, the canary and
/// the proxy's upstream, all through one egress.
extension Keys {
    public static let egressProxy = egress(
        "egress.proxy", default: "the environment: https_proxy/HTTPS_PROXY, http_proxy/HTTP_PROXY, no_proxy/NO_PROXY, as curl reads them",
        help:
            "The forward proxy the provider's token fetches, canary and proxied requests go through: http://HOST:PORT, or direct; unset, the environment decides."
    )
    public static let egressProxyCredentialsFile = optionalPath(
        "egress.proxyCredentialsFile",
        help: "A file holding user:password for the forward proxy (mode 0600 or stricter); never in the configuration or a log line.",
        scope: .inherited)

    static let egressKeys: [KeySpec] = [egressProxy.spec, egressProxyCredentialsFile.spec]

    /// `egress.proxy`: unset unless given, a provider's own else the top level's.
    static func egress(_ name: String, default description: String, help: String) -> SettingKey<Egress.Route?> {
        SettingKey(
            spec: .init(
                name: name, kind: .egressProxy, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true,
                scope: .inherited)
        ) {
            guard case .text(let text)? = $0, case .success(let route) = Egress.parseProxy(text) else { return nil }
            return route
        }
    }
}

extension DaemonConfiguration {
    /// How a request of `provider` to `url` leaves the host, and why (EGRESS-1).
    public func egress(of provider: ProviderConfiguration, for url: String) -> Result<Egress, EgressProblem> {
        Egress.resolve(url: url, setting: inherited(Keys.egressProxy, for: provider), environment: proxyEnvironment)
    }

    /// The URLs `provider`'s requests go to: its token service, its canary, its proxy's upstream.
    public func outboundURLs(of provider: ProviderConfiguration) -> [(what: String, url: String)] {
        var urls = [("token service", provider.configuration.tokenServiceBaseURL)]
        if let canary = inherited(Keys.canaryURL, for: provider) { urls.append(("canary", canary)) }
        if let upstream = provider[Keys.proxyUpstream], provider[Keys.proxyListen] != nil { urls.append(("proxy upstream", upstream)) }
        return urls
    }

    /// One line per provider: where its requests go out, and why (`--check-config`, the start line).
    public var egressSummary: [(provider: String, egress: String)] {
        providers.map { provider in
            let routes = outboundURLs(of: provider).map { what, url -> (String, String) in
                (what, (try? egress(of: provider, for: url).get())?.description ?? "unusable")
            }
            // One egress for all of them, as it should be: said once.
            if Set(routes.map(\.1)).count == 1 { return (provider.name, routes[0].1) }
            return (provider.name, routes.map { "\($0.0): \($0.1)" }.joined(separator: "; "))
        }
    }
}
