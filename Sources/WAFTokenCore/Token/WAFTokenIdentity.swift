/// Whom a token belongs to: the web ACL's token service and the domain it was fetched for.
///
/// A token is good only for its identity (docs/rules.md, RELOAD-2): a reload that changes either part
/// drops the token everywhere, and nothing is ever stored under another identity.
public struct WAFTokenIdentity: Sendable, Hashable, CustomStringConvertible {
    /// The application integration URL without its trailing `/` (CFG-1).
    public let tokenServiceBaseURL: String
    public let domainName: String

    public init(tokenServiceBaseURL: String, domainName: String) {
        self.tokenServiceBaseURL = tokenServiceBaseURL
        self.domainName = domainName
    }

    public var description: String { "\(domainName) at \(tokenServiceBaseURL)" }
}
