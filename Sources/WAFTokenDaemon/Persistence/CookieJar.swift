import WAFTokenCore

/// A Netscape/curl cookie jar holding the `aws-waf-token` cookie (COOK-3): `curl -b FILE` reads it.
enum CookieJar {
    static let header = "# Netscape HTTP Cookie File\n# Written by waf-tokend.\n"

    /// The jar for `cookie`, or an empty one. A line: domain, include-subdomains, path, secure,
    /// expiry (Unix seconds), name, value, separated by tabs.
    static func text(_ cookie: WAFCookie?) -> String {
        guard let cookie else { return header }
        let fields = [
            cookie.domain, cookie.includesSubdomains ? "TRUE" : "FALSE", cookie.path, cookie.secure ? "TRUE" : "FALSE",
            String(Int64(cookie.expires.timeIntervalSince1970)), WAFCookie.name, cookie.value,
        ]
        return header + fields.joined(separator: "\t") + "\n"
    }
}
