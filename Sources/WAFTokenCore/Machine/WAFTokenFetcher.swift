/// What the provider asks of the token service: one new token.
public struct WAFTokenFetchRequest: Sendable {
    public let configuration: WAFConfiguration
    /// The token the provider holds now, sent along so the service can renew it; nil if none.
    public let existingToken: String?

    public init(configuration: WAFConfiguration, existingToken: String?) {
        self.configuration = configuration
        self.existingToken = existingToken
    }
}

/// The provider's only way to the token service.
///
/// An implementation makes one attempt (challenge, solve, verify) and either returns the token's
/// value or throws the `SdkError` that says what failed; retrying is the provider's job. It should
/// stop early when its task is cancelled (shutdown, the app going inactive).
public protocol WAFTokenFetcher: Sendable {
    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String
}
