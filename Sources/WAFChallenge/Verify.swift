import WAFJSON
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The body of `POST …/verify` (docs/protocol.md §3).
public struct VerifyRequest: Sendable, Hashable, Codable {
    public struct ChallengeEcho: Sendable, Hashable, Codable {
        public var input: String
        public var hmac: String
    }

    public struct Metric: Sendable, Hashable, Codable {
        public var name: String
        public var value: Double
        public var unit: String

        public init(name: String, value: Double, unit: String) {
            self.name = name
            self.value = value
            self.unit = unit
        }
    }

    /// The lower-case hex SHA-256 of the empty string, with an empty signal list: what the iOS SDK
    /// sends as its checksum.
    public static let mobileChecksum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public var challenge: ChallengeEcho
    public var solution: String
    public var client: String
    public var checksum: String
    public var domain: String
    public var existingToken: String?
    public var signals: [String]
    public var metrics: [Metric]

    enum CodingKeys: String, CodingKey {
        case challenge, solution, client, checksum, domain, signals, metrics
        case existingToken = "existing_token"
    }

    public init(
        challenge: Challenge, solution: String, client: String, checksum: String, domain: String,
        existingToken: String?, metrics: [Metric] = []
    ) {
        self.challenge = ChallengeEcho(input: challenge.input, hmac: challenge.hmac)
        self.solution = solution
        self.client = client
        self.checksum = checksum
        self.domain = domain
        self.existingToken = existingToken
        signals = []
        self.metrics = metrics
    }

    public func encoded() throws -> [UInt8] {
        Array(try JSONEncoder().encode(self))
    }
}

/// What a 2xx answer to verify means.
public enum VerifyOutcome: Sendable, Hashable {
    case token(String)
    /// The challenge had expired; solve this one and verify again.
    case freshChallenge(Challenge)

    /// Reads a 2xx verify body.
    public init(parsing body: some Collection<UInt8>) throws(ChallengeError) {
        guard let document = JSONValue.parse(body) else { throw ChallengeError("the verify answer is not JSON") }
        guard case .object = document else { throw ChallengeError("the verify answer is \(document.kind), not an object") }
        if let token = document["token"] {
            guard let value = token.string else { throw ChallengeError("token is \(token.kind), not a string") }
            guard Self.isUsableToken(value) else {
                throw ChallengeError("token is not a usable cookie value (\(value.utf8.count) bytes)")
            }
            self = .token(value)
        } else if let inputs = document["inputs"] {
            self = .freshChallenge(try Challenge(inputs))
        } else {
            throw ChallengeError("the verify answer holds neither token nor inputs")
        }
    }

    /// The rule is the token's own (`WAFToken.isUsable`), which storage applies to a restored one too.
    public static func isUsableToken(_ value: String) -> Bool { WAFToken.isUsable(value) }
}
