import WAFHTTPWire
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension UpstreamTarget {
    /// `proxy.upstream`, checked: only `domainName`, a host below it, or a loopback host (an
    /// upstream on this machine); https, or http to loopback as CFG-1 allows for the token
    /// service. The target, or why `text` cannot be one for `domainName`.
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
}

/// A short reason, as `WAFConfigurationIssue.problem` wants it.
package struct ProblemText: Error, ExpressibleByStringInterpolation, Equatable {
    package let text: String
    package init(text: String) { self.text = text }
    package init(stringLiteral value: String) { text = value }
    package init(stringInterpolation: DefaultStringInterpolation) { text = String(stringInterpolation: stringInterpolation) }
}
