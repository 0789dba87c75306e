import NIOConcurrencyHelpers

/// The SDK's cookie manager (COOK-1…4): holds the `aws-waf-token` cookie of the latest token and
/// says, for a request path, whether it applies.
///
/// Readable from any thread without going through the provider's state queue; the provider writes
/// it whenever a token is fetched or loaded (COOK-4).
public final class WAFCookieManager: Sendable {
    private struct State {
        var settings: Settings
        var cookie: WAFCookie?
    }

    public struct Settings: Sendable, Hashable {
        public var setTokenCookie: Bool
        public var domainName: String
        public var path: String
        public var secure: Bool

        public init(configuration: WAFConfiguration, secure: Bool) {
            setTokenCookie = configuration.setTokenCookie
            domainName = configuration.domainName
            path = configuration.tokenCookiePath
            self.secure = secure
        }
    }

    private let state: NIOLockedValueBox<State>

    public init(settings: Settings) {
        state = NIOLockedValueBox(State(settings: settings, cookie: nil))
    }

    public var settings: Settings { state.withLockedValue { $0.settings } }

    /// The cookie as last stored, whatever the path; nil with `setTokenCookie` false (COOK-2).
    public var currentCookie: WAFCookie? { state.withLockedValue { $0.cookie } }

    /// The cookie for a request to `path`, or nil when none applies (COOK-1, COOK-2).
    public func cookie(forPath path: String) -> WAFCookie? {
        guard let cookie = currentCookie, cookie.applies(toPath: path) else { return nil }
        return cookie
    }

    /// Whether the token cookie goes to a request at `path`, for any token (COOK-1, COOK-2): for
    /// one that is sent with a token other than the stored one, as the proxy's replays are.
    public func applies(toPath path: String) -> Bool {
        let settings = settings
        return settings.setTokenCookie && WAFCookie.pathMatches(requestPath: path, cookiePath: settings.path)
    }

    /// The `Cookie` header value for a request to `path`, or nil when no cookie applies.
    public func cookieHeaderValue(forPath path: String) -> String? {
        cookie(forPath: path)?.headerValue
    }

    /// Writes the cookie for `token` (a no-op with `setTokenCookie` false, COOK-2).
    @discardableResult
    public func store(_ token: WAFToken) -> WAFCookie? {
        state.withLockedValue { state in
            guard state.settings.setTokenCookie else { return nil }
            let cookie = WAFCookie(
                token: token, domainName: state.settings.domainName, path: state.settings.path,
                secure: state.settings.secure)
            state.cookie = cookie
            return cookie
        }
    }

    /// Applies new settings; the stored cookie is rewritten for them, or dropped if cookies are off.
    func update(settings: Settings, token: WAFToken?) {
        state.withLockedValue { state in
            state.settings = settings
            state.cookie = nil
        }
        if let token { store(token) }
    }
}
