/// The errors of the AWS WAF mobile SDK (OBJ-5), with the case names of the shipped SDKs.
///
/// Every case carries a short `detail` so that an operator sees what went wrong, not only which
/// step. The case name (`name`) is the stable identifier: the daemon's socket API reports it.
public enum SdkError: Error, Sendable, CustomStringConvertible {
    case errorInvokingGetChallengeEndpoint(String)
    case invalidChallenge(String)
    case errorRunningChallenge(String)
    case invalidVerifyChallengeRequest(String)
    case invalidVerifyChallengeResponse(String)
    case errorInvokingVerifyEndpoint(String)
    case networkUnavailable(String)
    case unexpected(any Error)
    indirect case allRetriesFailed(SdkError)

    /// The case name, as the SDKs spell it.
    public var name: String {
        switch self {
        case .errorInvokingGetChallengeEndpoint: "errorInvokingGetChallengeEndpoint"
        case .invalidChallenge: "invalidChallenge"
        case .errorRunningChallenge: "errorRunningChallenge"
        case .invalidVerifyChallengeRequest: "invalidVerifyChallengeRequest"
        case .invalidVerifyChallengeResponse: "invalidVerifyChallengeResponse"
        case .errorInvokingVerifyEndpoint: "errorInvokingVerifyEndpoint"
        case .networkUnavailable: "networkUnavailable"
        case .unexpected: "unexpected"
        case .allRetriesFailed: "allRetriesFailed"
        }
    }

    /// One human line: what failed, then the detail.
    public var description: String {
        switch self {
        case .errorInvokingGetChallengeEndpoint(let detail):
            "could not get a challenge from the token service: \(detail)"
        case .invalidChallenge(let detail):
            "the token service sent a challenge that cannot be used: \(detail)"
        case .errorRunningChallenge(let detail):
            "solving the challenge failed: \(detail)"
        case .invalidVerifyChallengeRequest(let detail):
            "could not build the verify request: \(detail)"
        case .invalidVerifyChallengeResponse(let detail):
            "the token service's verify answer holds no usable token: \(detail)"
        case .errorInvokingVerifyEndpoint(let detail):
            "could not reach the verify endpoint: \(detail)"
        case .networkUnavailable(let detail):
            "the token service cannot be reached: \(detail)"
        case .unexpected(let error):
            "unexpected error: \(error)"
        case .allRetriesFailed(let last):
            "all retries failed; last error: \(last.description)"
        }
    }

    /// The error that caused this one, unwrapping `allRetriesFailed`.
    public var underlying: SdkError {
        if case .allRetriesFailed(let last) = self { return last.underlying }
        return self
    }
}

/// The provider was shut down before it could answer; delivered as `SdkError.unexpected`.
public struct WAFProviderShutDownError: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "the token provider was shut down" }
}
