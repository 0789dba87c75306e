#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token provider's settings (OBJ-2, CFG-1…10), validated once when built.
///
/// An instance is always valid: the initialisers refuse anything out of range with a
/// `WAFConfigurationError` naming key, value and what is allowed, and never clamp.
public struct WAFConfiguration: Sendable, Hashable {
    public let applicationIntegrationUrl: URL
    public let domainName: String
    public let backgroundRefreshEnabled: Bool
    public let maxErrorTokenRefreshDelayMsec: Int
    public let maxRetryCount: Int
    public let setTokenCookie: Bool
    public let tokenCookiePath: String
    public let tokenRefreshDelaySec: Int
    public let ranges: WAFRangeProfile

    public static let defaultMaxErrorTokenRefreshDelayMsec = 5000
    public static let defaultTokenCookiePath = "/"

    /// The default of `maxRetryCount` (CFG-5) depends on background refresh.
    public static func defaultMaxRetryCount(backgroundRefreshEnabled: Bool) -> Int {
        backgroundRefreshEnabled ? 5 : 3
    }

    /// `tokenRefreshDelaySec` defaults to the profile's default (CFG-8, CFG-10).
    public init(
        applicationIntegrationUrl: String,
        domainName: String,
        backgroundRefreshEnabled: Bool = true,
        maxErrorTokenRefreshDelayMsec: Int = defaultMaxErrorTokenRefreshDelayMsec,
        maxRetryCount: Int? = nil,
        setTokenCookie: Bool = true,
        tokenCookiePath: String = defaultTokenCookiePath,
        tokenRefreshDelaySec: Int? = nil,
        ranges: WAFRangeProfile = .seed
    ) throws(WAFConfigurationError) {
        var settings: [String: WAFSettingValue] = [
            WAFConfigurationKey.applicationIntegrationUrl.rawValue: .string(applicationIntegrationUrl),
            WAFConfigurationKey.domainName.rawValue: .string(domainName),
            WAFConfigurationKey.backgroundRefreshEnabled.rawValue: .bool(backgroundRefreshEnabled),
            WAFConfigurationKey.maxErrorTokenRefreshDelayMsec.rawValue: .int(maxErrorTokenRefreshDelayMsec),
            WAFConfigurationKey.setTokenCookie.rawValue: .bool(setTokenCookie),
            WAFConfigurationKey.tokenCookiePath.rawValue: .string(tokenCookiePath),
            WAFConfigurationKey.ranges.rawValue: .string(ranges.rawValue),
        ]
        settings[WAFConfigurationKey.maxRetryCount.rawValue] = maxRetryCount.map(WAFSettingValue.int)
        settings[WAFConfigurationKey.tokenRefreshDelaySec.rawValue] = tokenRefreshDelaySec.map(WAFSettingValue.int)
        try self.init(settings: settings)
    }

    /// Builds a configuration from settings as sources give them (a YAML file, environment
    /// variables, command-line options), keyed by the SDK's names. Wrong types, unknown keys,
    /// missing required keys and out-of-range values are all reported together (CFG-9).
    public init(settings: [String: WAFSettingValue]) throws(WAFConfigurationError) {
        var validator = WAFConfigurationValidator()
        for key in settings.keys.sorted() where WAFConfigurationKey(rawValue: key) == nil {
            validator.issue(
                key: key, value: settings[key]?.rendered, problem: "is not a configuration key",
                allowed: WAFConfigurationKey.allCases.map(\.rawValue).joined(separator: ", "))
        }
        func value(_ key: WAFConfigurationKey) -> WAFSettingValue? { settings[key.rawValue] }

        // The profile first: it decides the other keys' ranges and a default.
        let ranges = value(.ranges).map { validator.rangeProfile($0) } ?? .seed
        validator.profile = ranges ?? .seed
        let url = validator.required(.applicationIntegrationUrl, value(.applicationIntegrationUrl))
            .flatMap { validator.applicationIntegrationUrl($0) }
        let domain = validator.required(.domainName, value(.domainName)).flatMap { validator.domainName($0) }
        let background = value(.backgroundRefreshEnabled).map { validator.bool(.backgroundRefreshEnabled, $0) } ?? true
        let maxError =
            value(.maxErrorTokenRefreshDelayMsec).map { validator.int(.maxErrorTokenRefreshDelayMsec, $0) }
            ?? Self.defaultMaxErrorTokenRefreshDelayMsec
        let maxRetry =
            value(.maxRetryCount).map { validator.int(.maxRetryCount, $0) }
            ?? Self.defaultMaxRetryCount(backgroundRefreshEnabled: background ?? true)
        let setCookie = value(.setTokenCookie).map { validator.bool(.setTokenCookie, $0) } ?? true
        let cookiePath = value(.tokenCookiePath).map { validator.tokenCookiePath($0) } ?? Self.defaultTokenCookiePath
        let refreshDelay =
            value(.tokenRefreshDelaySec).map { validator.int(.tokenRefreshDelaySec, $0) }
            ?? validator.profile.defaultTokenRefreshDelaySec
        try validator.finish()

        applicationIntegrationUrl = url!
        domainName = domain!
        backgroundRefreshEnabled = background!
        maxErrorTokenRefreshDelayMsec = maxError!
        maxRetryCount = maxRetry!
        setTokenCookie = setCookie!
        tokenCookiePath = cookiePath!
        tokenRefreshDelaySec = refreshDelay!
        self.ranges = ranges!
    }
}

extension WAFConfiguration {
    /// The application integration URL with one trailing `/` dropped, ready for `/inputs` (CFG-1).
    public var tokenServiceBaseURL: String {
        let text = applicationIntegrationUrl.absoluteString
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// Whom a token from this configuration belongs to: web ACL and domain.
    public var identity: WAFTokenIdentity {
        WAFTokenIdentity(tokenServiceBaseURL: tokenServiceBaseURL, domainName: domainName)
    }

    public var tokenRefreshDelay: Duration { .seconds(tokenRefreshDelaySec) }
    public var maxErrorTokenRefreshDelay: Duration { .milliseconds(maxErrorTokenRefreshDelayMsec) }

    /// The settings as typed values, e.g. to print an effective configuration.
    public var settings: [String: WAFSettingValue] {
        [
            WAFConfigurationKey.applicationIntegrationUrl.rawValue: .string(applicationIntegrationUrl.absoluteString),
            WAFConfigurationKey.domainName.rawValue: .string(domainName),
            WAFConfigurationKey.backgroundRefreshEnabled.rawValue: .bool(backgroundRefreshEnabled),
            WAFConfigurationKey.maxErrorTokenRefreshDelayMsec.rawValue: .int(maxErrorTokenRefreshDelayMsec),
            WAFConfigurationKey.maxRetryCount.rawValue: .int(maxRetryCount),
            WAFConfigurationKey.setTokenCookie.rawValue: .bool(setTokenCookie),
            WAFConfigurationKey.tokenCookiePath.rawValue: .string(tokenCookiePath),
            WAFConfigurationKey.tokenRefreshDelaySec.rawValue: .int(tokenRefreshDelaySec),
            WAFConfigurationKey.ranges.rawValue: .string(ranges.rawValue),
        ]
    }
}
