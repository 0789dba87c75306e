#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The `aws-waf-token` cookie for one token (COOK-3).
public struct WAFCookie: Sendable, Hashable, CustomStringConvertible {
    public static let name = "aws-waf-token"
    /// The SDK's cookie lifetime, counted from the token's fetch time.
    public static let lifetime: Duration = .seconds(24 * 3600)

    public let value: String
    /// `.` + domain name, so that subdomains are covered; an IP literal stands alone, since a
    /// cookie for an address can only be host-only.
    public let domain: String
    public let path: String
    public let expires: Date
    public let secure: Bool
    public let sameSite = "Lax"
    public let tokenFingerprint: String

    public init(token: WAFToken, domainName: String, path: String, secure: Bool) {
        value = token.value
        domain = WAFHost.isIPLiteral(domainName) ? domainName : "." + domainName
        self.path = path
        expires = token.fetchedAt.addingTimeInterval(Self.lifetime.seconds)
        self.secure = secure
        tokenFingerprint = token.fingerprint
    }

    /// Whether subdomains of the domain receive the cookie too (false for an IP literal).
    public var includesSubdomains: Bool { domain.hasPrefix(".") }

    /// The value of a `Cookie` request header carrying this cookie.
    public var headerValue: String { "\(Self.name)=\(value)" }

    /// The cookie as a `Set-Cookie` header value.
    public var setCookieHeaderValue: String {
        var parts = [
            headerValue, "Domain=\(domain)", "Path=\(path)",
            "Expires=\(HTTPDate.format(expires))", "SameSite=\(sameSite)",
        ]
        if secure { parts.append("Secure") }
        return parts.joined(separator: "; ")
    }

    /// RFC 6265 §5.1.4 path-match of a request path against this cookie's path (COOK-1).
    public func applies(toPath requestPath: String) -> Bool {
        Self.pathMatches(requestPath: requestPath, cookiePath: path)
    }

    /// RFC 6265 §5.1.4: the paths are equal; or the cookie path is a prefix of the request path and
    /// either ends in `/` or is followed in the request path by `/`. A query or fragment is not part
    /// of the path; a path that does not start with `/` matches nothing.
    public static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        let request = requestPath.utf8.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        let cookie = cookiePath.utf8
        guard request.first == UInt8(ascii: "/"), request.starts(with: cookie) else { return false }
        if request.count == cookie.count || cookie.last == UInt8(ascii: "/") { return true }
        return request.dropFirst(cookie.count).first == UInt8(ascii: "/")
    }

    public var description: String { "WAFCookie(\(domain)\(path), token \(tokenFingerprint))" }

    /// A request's `Cookie` header values as one, with any `aws-waf-token` of its own taken out and
    /// `token` put in its place (none with nil): the client's other cookies kept, in order.
    public static func merged(_ headerValues: [String], token: String?) -> String {
        let pairs = headerValues.flatMap { $0.split(separator: ";") }.map { pair in
            pair.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
        }.map { String($0) }.filter { pair in !pair.isEmpty && pair.prefix { $0 != "=" } != name }
        return (pairs + (token.map { ["\(name)=\($0)"] } ?? [])).joined(separator: "; ")
    }
}

/// RFC 7231 IMF-fixdate, as cookies and HTTP headers expect (`Sun, 06 Nov 1994 08:49:37 GMT`).
public enum HTTPDate {
    /// glibc's `strftime` in the C locale gives the English day and month names the format needs;
    /// the process never calls `setlocale`, so the C locale is what it gets.
    public static func format(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 40)
        let length = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
