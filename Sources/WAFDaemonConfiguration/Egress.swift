import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif
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
                    "\(name) is \(WAFConfigurationIssue.withoutCredentials(text).debugDescription), which the daemon cannot use: it takes an http:// forward proxy with no credentials in it (they go in egress.proxyCredentialsFile); set egress.proxy to choose"
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

/// `no_proxy`'s list as curl (7.86 and later) reads it: `*` alone for every host; entries split at
/// commas and spaces; a name covers itself and the names below it (a leading `.` or `*.` the same,
/// a trailing `.` ignored on both sides); an address, IPv4 or IPv6, only itself or, with `/bits`,
/// its block, never as a suffix. A port after an entry is ignored.
struct NoProxy {
    let entries: [String]
    let everything: Bool

    init(_ text: String) {
        everything = text.trimmingWhitespace == "*"
        entries = text.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map { $0.lowercased() }
    }

    func covers(_ host: String) -> Bool {
        if everything { return true }
        let host = host.hasSuffix(".") ? String(host.dropLast()) : host
        let hostIsAddress = WAFHost.isIPLiteral(host)
        return entries.contains { entry in
            var name = entry.hasPrefix("*.") ? String(entry.dropFirst(2)) : entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
            if name.hasPrefix("[") {
                // [v6] or [v6]:port
                name = String(name.dropFirst().prefix { $0 != "]" })
            } else if !name.contains("::"), name.filter({ $0 == ":" }).count == 1, let colon = name.firstIndex(of: ":") {
                name = String(name[..<colon])
            }
            if name.hasSuffix(".") { name = String(name.dropLast()) }
            if let slash = name.firstIndex(of: "/") {
                return hostIsAddress && Self.inBlock(host, String(name[..<slash]), Int(name[name.index(after: slash)...]))
            }
            if hostIsAddress { return Self.address(host) != nil && Self.address(host) == Self.address(name) }
            return !name.isEmpty && (host == name || (!WAFHost.isIPLiteral(name) && host.hasSuffix("." + name)))
        }
    }

    /// Whether address `host` is in `network`/`bits`, both of one family.
    private static func inBlock(_ host: String, _ network: String, _ bits: Int?) -> Bool {
        guard let bits, let bytes = address(host), let base = address(network), bytes.count == base.count, (0...bytes.count * 8).contains(bits)
        else { return false }
        for index in bytes.indices {
            let kept = max(0, min(8, bits - index * 8))
            let mask: UInt8 = kept == 0 ? 0 : ~UInt8(0) << (8 - kept)
            if bytes[index] & mask != base[index] & mask { return false }
        }
        return true
    }

    /// An address's bytes: 4 for IPv4, 16 for IPv6; nil for a name.
    private static func address(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
        return nil
    }
}
