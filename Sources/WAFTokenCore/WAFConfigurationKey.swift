/// The SDK's configuration keys (CFG-1…8), verbatim, with what each allows.
///
/// The table lives here once: validation messages, `--check-config` and the README's reference are
/// all read off it.
public enum WAFConfigurationKey: String, CaseIterable, Sendable {
    case applicationIntegrationUrl
    case domainName
    case backgroundRefreshEnabled
    case maxErrorTokenRefreshDelayMsec
    case maxRetryCount
    case setTokenCookie
    case tokenCookiePath
    case tokenRefreshDelaySec

    public static let maxErrorTokenRefreshDelayMsecRange = 1...30_000
    public static let maxRetryCountRange = 0...10
    public static let tokenRefreshDelaySecRange = 300...600

    public var isRequired: Bool {
        self == .applicationIntegrationUrl || self == .domainName
    }

    /// What the key accepts, in words an operator can act on.
    public var allowed: String {
        switch self {
        case .applicationIntegrationUrl:
            "an absolute https URL (http only to a loopback host), without user, query or fragment"
        case .domainName:
            "a bare host name (no scheme, port, path or query) that is not a public suffix"
        case .backgroundRefreshEnabled, .setTokenCookie:
            "true or false"
        case .maxErrorTokenRefreshDelayMsec, .maxRetryCount, .tokenRefreshDelaySec:
            "an integer \(integerRange!.lowerBound)…\(integerRange!.upperBound)"
        case .tokenCookiePath:
            "a path starting with / (no spaces, ';' or control characters)"
        }
    }

    /// The allowed range of an integer key, nil for the others.
    public var integerRange: ClosedRange<Int>? {
        switch self {
        case .maxErrorTokenRefreshDelayMsec: Self.maxErrorTokenRefreshDelayMsecRange
        case .maxRetryCount: Self.maxRetryCountRange
        case .tokenRefreshDelaySec: Self.tokenRefreshDelaySecRange
        default: nil
        }
    }

    /// One line on what the key does, from the SDK's specification.
    public var help: String {
        switch self {
        case .applicationIntegrationUrl: "The web ACL's application integration URL (the token service)."
        case .domainName: "The domain the token is for, e.g. example.com; not a public suffix."
        case .backgroundRefreshEnabled: "Keep a token cached and refresh it in the background."
        case .maxErrorTokenRefreshDelayMsec: "Wait between attempts once the backoff retries are spent."
        case .maxRetryCount: "Retries with exponential backoff (from 100 ms) after a failed fetch."
        case .setTokenCookie: "Supply the aws-waf-token cookie."
        case .tokenCookiePath: "The cookie goes to requests at this path and below it."
        case .tokenRefreshDelaySec: "At most this long between background refreshes."
        }
    }

    /// The default, in words (nil for the required keys).
    public var defaultDescription: String? {
        switch self {
        case .applicationIntegrationUrl, .domainName: nil
        case .backgroundRefreshEnabled, .setTokenCookie: "true"
        case .maxErrorTokenRefreshDelayMsec: "5000"
        case .maxRetryCount: "5 with background refresh, else 3"
        case .tokenCookiePath: "/"
        case .tokenRefreshDelaySec: "300"
        }
    }
}
