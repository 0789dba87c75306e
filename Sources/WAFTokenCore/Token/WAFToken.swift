import Crypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One AWS WAF token (OBJ-1).
///
/// The value is a bearer secret: `description` shows only its fingerprint, so that interpolating a
/// token into a log line never leaks it. Use `value` (or the SDK's `getValue()`) deliberately.
public struct WAFToken: Sendable, Hashable, CustomStringConvertible {
    /// The token as the token service issued it. Opaque: never parsed.
    public let value: String
    /// When it was fetched, by the wall clock (for display, cookies and persisted state).
    public let fetchedAt: Date
    /// When it was fetched, by the provider's monotonic clock (for ages and staleness).
    public let fetchedAtMonotonic: MonotonicInstant

    public init(value: String, fetchedAt: Date, fetchedAtMonotonic: MonotonicInstant) {
        self.value = value
        self.fetchedAt = fetchedAt
        self.fetchedAtMonotonic = fetchedAtMonotonic
    }

    /// The SDK's accessor for the token's string form.
    public func getValue() -> String { value }

    /// First 8 hex digits of the SHA-256 of the value: safe to log, enough to tell tokens apart.
    public var fingerprint: String { Self.fingerprint(of: value) }

    public static func fingerprint(of value: String) -> String {
        SHA256.hash(data: Array(value.utf8)).prefix(4).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// The token's age at `now` on the same monotonic clock.
    public func age(at now: MonotonicInstant) -> Duration {
        max(.zero, now - fetchedAtMonotonic)
    }

    public var description: String { "WAFToken(\(fingerprint))" }

    public static let maximumLength = 4096

    /// A token must fit a cookie: RFC 6265 cookie-octets only (no spaces, quotes, commas,
    /// semicolons or backslashes), and not absurdly long. A verify answer's token, and one
    /// restored from a state file, is refused otherwise.
    public static func isUsable(_ value: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= maximumLength else { return false }
        return value.utf8.allSatisfy { byte in
            byte == 0x21 || (0x23...0x2B).contains(byte) || (0x2D...0x3A).contains(byte)
                || (0x3C...0x5B).contains(byte) || (0x5D...0x7E).contains(byte)
        }
    }
}
