import WAFJSON

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A challenge from `GET /inputs` (docs/protocol.md §1), checked field by field.
public struct Challenge: Sendable, Hashable {
    public static let difficultyRange = 0...32
    public static let defaultMemory = 128
    public static let hmacByteCount = 32

    /// Opaque to the client: sent back unchanged.
    public let input: String
    public let hmac: String
    public let region: String?
    public let type: ChallengeType
    public let difficulty: Int
    /// scrypt's N; 128 when absent.
    public let memory: Int

    public init(input: String, hmac: String, region: String?, type: ChallengeType, difficulty: Int, memory: Int = defaultMemory) {
        self.input = input
        self.hmac = hmac
        self.region = region
        self.type = type
        self.difficulty = difficulty
        self.memory = memory
    }

    /// Parses and checks a `/inputs` body.
    public init(parsing body: some Collection<UInt8>) throws(ChallengeError) {
        guard let document = JSONValue.parse(body) else { throw ChallengeError("the body is not JSON") }
        try self.init(document)
    }

    /// Checks a challenge document (also found as `inputs` in a verify answer).
    public init(_ document: JSONValue) throws(ChallengeError) {
        guard case .object = document else { throw ChallengeError("the challenge is \(document.kind), not an object") }
        guard let challenge = document["challenge"], case .object = challenge else {
            throw ChallengeError("challenge is missing or not an object")
        }
        guard let input = challenge["input"]?.string, !input.isEmpty else {
            throw ChallengeError("challenge.input is missing or not a non-empty string")
        }
        guard Base64.decode(input) != nil else { throw ChallengeError("challenge.input is not base64") }
        guard let hmac = challenge["hmac"]?.string else { throw ChallengeError("challenge.hmac is missing or not a string") }
        guard let mac = Base64.decode(hmac) else { throw ChallengeError("challenge.hmac is not base64") }
        guard mac.count == Self.hmacByteCount else {
            throw ChallengeError("challenge.hmac decodes to \(mac.count) bytes, not \(Self.hmacByteCount)")
        }
        if let region = challenge["region"], region.string == nil, region != .null {
            throw ChallengeError("challenge.region is \(region.kind), not a string")
        }
        guard let typeID = document["challenge_type"]?.string else {
            throw ChallengeError("challenge_type is missing or not a string")
        }
        guard let type = ChallengeType(rawValue: typeID) else {
            throw ChallengeError("challenge_type \(typeID.prefix(80)) is not a type this client knows")
        }
        guard let difficulty = document["difficulty"]?.integer else {
            throw ChallengeError("difficulty is missing or not an integer")
        }
        guard Self.difficultyRange.contains(difficulty) else {
            throw ChallengeError("difficulty \(difficulty) is outside \(Self.difficultyRange.lowerBound)…\(Self.difficultyRange.upperBound)")
        }
        var memory = Self.defaultMemory
        if let given = document["memory"], given != .null {
            guard let value = given.integer else { throw ChallengeError("memory is not an integer") }
            memory = value
        }
        self.init(
            input: input, hmac: hmac, region: challenge["region"]?.string, type: type, difficulty: difficulty,
            memory: memory)
        let puzzle = proofOfWork(checksum: "", nonceFormat: .decimal)
        if let reason = puzzle.unsolvableReason { throw ChallengeError(reason) }
    }

    /// The puzzle to solve for this challenge.
    public func proofOfWork(checksum: String, nonceFormat: NonceFormat) -> ProofOfWork {
        ProofOfWork(
            type: type, input: input, checksum: checksum, difficulty: difficulty, memory: memory,
            nonceFormat: nonceFormat)
    }

    /// The challenge as the service sends it.
    public var document: JSONValue {
        var challenge: [String: JSONValue] = ["input": .string(input), "hmac": .string(hmac)]
        if let region { challenge["region"] = .string(region) }
        return .object([
            "challenge": .object(challenge), "challenge_type": .string(type.id),
            "difficulty": .number(Double(difficulty)), "memory": .number(Double(memory)),
        ])
    }
}

/// Why a challenge cannot be used.
public struct ChallengeError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Standard base64, with or without padding.
public enum Base64 {
    public static func decode(_ text: String) -> [UInt8]? {
        var padded = text
        let remainder = padded.utf8.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { padded += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: padded).map { Array($0) }
    }

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
    }
}
