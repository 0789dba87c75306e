import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `proxy.upstream`, checked: where the proxy sends requests, and so the token. Only `domainName`,
/// a host below it, or a loopback host (an upstream on this machine); https, or http to loopback
/// as CFG-1 allows for the token service.
package struct UpstreamTarget: Sendable, Hashable {
    package let secure: Bool
    /// The host to connect to, IPv6 without brackets.
    package let host: String
    package let port: Int
    /// The URL's path with one trailing `/` dropped: request paths are appended to it.
    package let basePath: String
    /// The upstream request's `Host`: the URL's authority as written.
    package let authority: String

    /// The target, or why `text` cannot be one for `domainName`.
    package static func parse(_ text: String, domainName: String) -> Result<UpstreamTarget, ProblemText> {
        let url: URL, rawHost: String
        switch WAFServiceURL.check(text) {
        case .success(let checked): (url, rawHost) = checked
        case .failure(let problem): return .failure(ProblemText(text: problem.text))
        }
        let host = (rawHost.hasPrefix("[") ? String(rawHost.dropFirst().dropLast()) : rawHost).lowercased()
        let domain = domainName.lowercased()
        guard WAFHost.isLoopback(host) || host == domain || host.hasSuffix("." + domain) else {
            return .failure("names \(host), which is neither domainName (\(domain)), a host below it, nor loopback")
        }
        let secure = url.scheme?.lowercased() == "https"
        var path = url.path(percentEncoded: true)
        if path.hasSuffix("/") { path.removeLast() }
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return .success(
            UpstreamTarget(
                secure: secure, host: host, port: url.port ?? (secure ? 443 : 80), basePath: path,
                authority: url.port.map { "\(bracketed):\($0)" } ?? bracketed))
    }

    /// The upstream's target for a client's request target: its path and query appended to the
    /// base path. An absolute-form target (`http://elsewhere/x`) keeps only its path and query:
    /// it never chooses the host.
    package func target(for requestURI: String) -> String {
        basePath + Self.originForm(requestURI)
    }

    /// The path and query of a request target: an absolute-form target loses its scheme and
    /// authority, and anything else is put below `/`.
    package static func originForm(_ requestURI: String) -> String {
        var uri = Substring(requestURI)
        if !uri.hasPrefix("/"), let schemeEnd = uri.firstRange(of: "://") {
            let rest = uri[schemeEnd.upperBound...]
            uri = rest.firstIndex { $0 == "/" || $0 == "?" }.map { rest[$0...] } ?? ""
        }
        if uri.hasPrefix("?") || uri.isEmpty { uri = "/" + uri }
        if !uri.hasPrefix("/") { uri = "/" + uri }  // "*" or garbage: still below the base path
        return String(uri)
    }

    package var url: String { "\(secure ? "https" : "http")://\(authority)\(basePath)/" }
}

/// A short reason, as `WAFConfigurationIssue.problem` wants it.
package struct ProblemText: Error, ExpressibleByStringInterpolation, Equatable {
    package let text: String
    package init(text: String) { self.text = text }
    package init(stringLiteral value: String) { text = value }
    package init(stringInterpolation: DefaultStringInterpolation) { text = String(stringInterpolation: stringInterpolation) }
}
