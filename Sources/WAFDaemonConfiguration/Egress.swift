import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The way out of the host a provider's requests take (docs/egress.md): AWS WAF binds a token to
/// where it was acquired (Bot Control's `TGT_TokenReuseIp`, its provenance labels), so a token is
/// fetched, checked by the canary and used by the proxy through the same egress (EGRESS-1).
public struct Egress: Sendable, Hashable, CustomStringConvertible {
    public enum Route: Sendable, Hashable {
        case direct
        /// An `http://` forward proxy: `CONNECT` for https, and for http too.
        case proxy(host: String, port: Int)
    }

    public let route: Route
    /// Why this route: `egress.proxy`, the variable that named the proxy, `NO_PROXY`, or none set.
    public let source: String

    public init(_ route: Route, source: String) {
        self.route = route
        self.source = source
    }

    /// What the metrics' `egress` label says: `direct`, or the proxy's host and port (never its
    /// credentials, which are not in the setting).
    public var label: String {
        switch route {
        case .direct: "direct"
        case .proxy(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }

    public var description: String {
        switch route {
        case .direct: "direct (\(source))"
        case .proxy: "proxy \(label) (\(source))"
        }
    }

    /// `egress.proxy`'s text: `direct`, or `http://HOST:PORT` (a trailing `/` allowed). Nil: not one.
    /// Credentials in it are refused: they come from `egress.proxyCredentialsFile` only.
    public static func parseProxy(_ text: String) -> Result<Route, EgressProblem> {
        if text == "direct" { return .success(.direct) }
        var rest = Substring(text)
        guard rest.lowercased().hasPrefix("http://") else {
            return .failure(EgressProblem("is neither direct nor an http:// forward proxy (https://, socks are not supported)"))
        }
        rest = rest.dropFirst("http://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("@") else { return .failure(EgressProblem("holds credentials; they go in egress.proxyCredentialsFile only")) }
        guard !rest.contains("/"), let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port)
        else {
            return .failure(EgressProblem("is not http://HOST:PORT"))
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return .failure(EgressProblem("names no host")) }
        return .success(.proxy(host: host.lowercased(), port: port))
    }

    /// The egress for a request to `url`: `egress.proxy` when set (`setting`), else the
    /// environment as curl reads it: `https_proxy`/`HTTPS_PROXY` for https URLs,
    /// `http_proxy`/`HTTP_PROXY` for http (the lower-case name first), unless `no_proxy`/`NO_PROXY`
    /// lists the URL's host. A proxy the environment names that the daemon cannot use is an error.
    public static func resolve(url: String, setting: Route?, environment: [String: String]) -> Result<Egress, EgressProblem> {
        if let setting { return .success(Egress(setting, source: "egress.proxy")) }
        let parsed = URLComponents(string: url)
        let secure = parsed?.scheme?.lowercased() == "https"
        let names = secure ? ["https_proxy", "HTTPS_PROXY"] : ["http_proxy", "HTTP_PROXY"]
        guard let name = names.first(where: { !(environment[$0] ?? "").isEmpty }), let value = environment[name] else {
            return .success(Egress(.direct, source: "no \(names[1]) in the environment"))
        }
        var host = (parsed?.host ?? "").lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let exception = ["no_proxy", "NO_PROXY"].first(where: { !(environment[$0] ?? "").isEmpty }),
            NoProxy(environment[exception] ?? "").covers(host)
        {
            return .success(Egress(.direct, source: "\(exception) lists \(host)"))
        }
        // curl takes a proxy without a scheme for http://.
        let text = value.contains("://") ? value : "http://" + value
        switch parseProxy(text) {
        case .success(.direct), .failure:
            return .failure(
                EgressProblem(
                    "\(name) is \(value.debugDescription), which the daemon cannot use: it takes an http:// forward proxy with no credentials in it (they go in egress.proxyCredentialsFile); set egress.proxy to choose"
                ))
        case .success(let route):
            return .success(Egress(route, source: name))
        }
    }
}

/// Why an egress cannot be used, in words for a configuration issue.
public struct EgressProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// `no_proxy`'s list as curl reads it: `*` for every host; a name, which covers itself and the
/// names below it (a leading `.` or `*.` the same); an IPv4 address or a CIDR block; an IPv6
/// address. A port after an entry is ignored.
struct NoProxy {
    let entries: [String]

    init(_ text: String) {
        entries = text.split(separator: ",").map { String($0.filter { !$0.isWhitespace }).lowercased() }.filter { !$0.isEmpty }
    }

    func covers(_ host: String) -> Bool {
        entries.contains { entry in
            if entry == "*" { return true }
            var name = entry.hasPrefix("*.") ? String(entry.dropFirst(2)) : entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            if name.hasPrefix("[") { name = String(name.dropFirst().prefix { $0 != "]" }) }
            if let slash = name.firstIndex(of: "/") { return Self.inBlock(host, String(name[..<slash]), Int(name[name.index(after: slash)...])) }
            if !name.contains("::"), name.filter({ $0 == ":" }).count == 1, let colon = name.firstIndex(of: ":") { name = String(name[..<colon]) }
            return host == name || (!WAFHost.isIPLiteral(name) && host.hasSuffix("." + name))
        }
    }

    /// Whether IPv4 `host` is in `network`/`bits`.
    private static func inBlock(_ host: String, _ network: String, _ bits: Int?) -> Bool {
        guard let bits, (0...32).contains(bits), let address = ipv4(host), let base = ipv4(network) else { return false }
        let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
        return address & mask == base & mask
    }

    private static func ipv4(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).compactMap { UInt8($0) }
        guard parts.count == 4, text.split(separator: ".").count == 4 else { return nil }
        return parts.reduce(0) { $0 << 8 | UInt32($1) }
    }
}
