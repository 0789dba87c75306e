#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// CFG-1's rule for a URL the token, or the requests that earn it, may go to: absolute, without
/// user, query or fragment, https — or http to a loopback host. The token service's URL and the
/// proxy's upstream are both held to it.
public enum WAFServiceURL {
    /// Why a URL breaks the rule, in the words a configuration error uses.
    public struct Problem: Error, Equatable, Sendable {
        public let text: String
    }

    /// The URL, and its host as written (IPv6 still in brackets); or the problem with `text`.
    public static func check(_ text: String) -> Result<(url: URL, host: String), Problem> {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            let host = url.host(percentEncoded: false), !host.isEmpty
        else { return .failure(Problem(text: "is not an absolute URL")) }
        guard url.user == nil, url.password == nil else { return .failure(Problem(text: "holds user credentials")) }
        guard url.query == nil, url.fragment == nil else { return .failure(Problem(text: "has a query or fragment")) }
        switch scheme {
        case "https": return .success((url, host))
        case "http" where WAFHost.isLoopback(host): return .success((url, host))
        case "http": return .failure(Problem(text: "uses http to a host that is not loopback"))
        default: return .failure(Problem(text: "has the scheme \(scheme)"))
        }
    }
}
