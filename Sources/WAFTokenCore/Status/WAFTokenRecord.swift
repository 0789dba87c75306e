/// A token as it is to be stored for its identity (the daemon's state file and sinks), or, with no
/// token, the order to remove what is stored: the identity changed (docs/rules.md, RELOAD-2).
public struct WAFTokenRecord: Sendable, Hashable {
    public let identity: WAFTokenIdentity
    public let token: WAFToken?
    /// The cookie consumers get for it under the settings in force (COOK-3); nil with cookies off.
    public let cookie: WAFCookie?
    /// Fetched, or loaded (restored from state, or handed in): a loaded token is already stored
    /// where it came from, and one whose fetch time is untrusted must not be stored as if trusted.
    public let origin: WAFTokenOrigin

    public init(identity: WAFTokenIdentity, token: WAFToken?, cookie: WAFCookie?, origin: WAFTokenOrigin) {
        self.identity = identity
        self.token = token
        self.cookie = cookie
        self.origin = origin
    }
}
