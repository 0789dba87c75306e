/// `proxy.upstream` as the proxy uses it: where requests go, and so the token (the configuration
/// checks it: `UpstreamTarget.parse`). A value of the wire's: a request target's mapping below it
/// is HTTP's business, whoever read the URL.
package struct UpstreamTarget: Sendable, Hashable {
    package let secure: Bool
    /// The host to connect to, IPv6 without brackets.
    package let host: String
    package let port: Int
    /// The URL's path with one trailing `/` dropped: request paths are appended to it.
    package let basePath: String
    /// The upstream request's `Host`: the URL's authority as written.
    package let authority: String

    /// `host:port`, as a forward proxy's `CONNECT` names it (the port always written).
    package var connectAuthority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    package init(secure: Bool, host: String, port: Int, basePath: String, authority: String) {
        self.secure = secure
        self.host = host
        self.port = port
        self.basePath = basePath
        self.authority = authority
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
        // Nearly every request: already a path.
        if requestURI.utf8.first == UInt8(ascii: "/") { return requestURI }
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
