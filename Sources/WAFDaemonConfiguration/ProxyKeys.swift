import WAFHTTPWire
import WAFTokenCore

/// The proxy's keys of one provider, checked together (each key alone is `SettingCheck`'s).
enum ProxyKeys {
    /// What only the keys together can say wrong: an upstream without a listener or the other way
    /// round, an upstream the token must not go to.
    static func issues(_ values: [String: CheckedValue], domainName: String) -> [WAFConfigurationIssue] {
        let listen = Keys.proxyListen.spec, upstream = Keys.proxyUpstream.spec
        switch (values[listen.name], values[upstream.name]) {
        case (nil, nil):
            return []
        case (.some, nil):
            return [WAFConfigurationIssue(key: upstream.name, value: nil, problem: "is required with proxy.listen", allowed: upstream.allowed)]
        case (nil, .text(let url)?):
            return [WAFConfigurationIssue(key: listen.name, value: nil, problem: "is required with proxy.upstream (\(url))", allowed: listen.allowed)]
        case (_, .text(let url)?):
            if case .failure(let problem) = UpstreamTarget.parse(url, domainName: domainName) {
                return [WAFConfigurationIssue(key: upstream.name, value: url.debugDescription, problem: problem.text, allowed: upstream.allowed)]
            }
            return []
        default:
            return []
        }
    }

    /// The canary carries the token: it may go only where the proxy's upstream may (https, or http
    /// to loopback; the provider's domain, below it, or loopback).
    static func canaryIssues(_ values: [String: CheckedValue], domainName: String) -> [WAFConfigurationIssue] {
        let spec = Keys.canaryURL.spec
        guard case .text(let url)? = values[spec.name] else { return [] }
        if case .failure(let problem) = UpstreamTarget.parse(url, domainName: domainName) {
            return [WAFConfigurationIssue(key: spec.name, value: url.debugDescription, problem: problem.text, allowed: spec.allowed)]
        }
        return []
    }
}
