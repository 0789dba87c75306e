import WAFTokenCore

/// A Netscape/curl cookie jar holding the `aws-waf-token` cookie of every provider (COOK-3), one
/// line each: `curl -b FILE` sends each API the cookie of its own domain.
package enum CookieJar {
    package static let header = "# Netscape HTTP Cookie File\n# Written by waf-tokend.\n"

    /// The jar for `cookies`, or an empty one. A line: domain, include-subdomains, path, secure,
    /// expiry (Unix seconds), name, value, separated by tabs.
    package static func text(_ cookies: [WAFCookie]) -> String {
        header
            + cookies.map { cookie in
                let fields = [
                    cookie.domain, cookie.includesSubdomains ? "TRUE" : "FALSE", cookie.path, cookie.secure ? "TRUE" : "FALSE",
                    String(Int64(cookie.expires.timeIntervalSince1970)), WAFCookie.name, cookie.value,
                ]
                return fields.joined(separator: "\t") + "\n"
            }.joined()
    }
}
