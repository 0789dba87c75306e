/// The SDK's configuration keys (CFG-1…8), verbatim, and the range profile of CFG-10.
public enum WAFConfigurationKey: String, CaseIterable, Sendable {
    case applicationIntegrationUrl
    case domainName
    case backgroundRefreshEnabled
    case maxErrorTokenRefreshDelayMsec
    case maxRetryCount
    case setTokenCookie
    case tokenCookiePath
    case tokenRefreshDelaySec
    case ranges

    /// What the key accepts under `profile`, in words an operator can act on.
    public func allowed(in profile: WAFRangeProfile = .seed) -> String {
        if let range = profile.range(of: self) { return "an integer \(range.lowerBound)…\(range.upperBound)" }
        switch self {
        case .applicationIntegrationUrl:
            return "an absolute https URL (http only to a loopback host), without user, query or fragment"
        case .domainName:
            return "a bare host name or IP address (no scheme, port, path or query) that is not a public suffix"
        case .tokenCookiePath:
            return "a path starting with / (no spaces, ';' or control characters)"
        case .ranges:
            return WAFRangeProfile.allCases.map(\.rawValue).joined(separator: " or ")
        default:
            return "true or false"
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
        case .ranges: "Range profile: seed (the SDK documents) or current (AWS's current documentation)."
        }
    }
}
