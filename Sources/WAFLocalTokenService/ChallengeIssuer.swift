import Crypto
import WAFChallenge

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Issues challenges signed with a key of its own, and checks them when they come back.
struct ChallengeIssuer: Sendable {
    /// The document inside `challenge.input`, in the shape AWS uses.
    struct InputDocument: Codable, Sendable {
        var version: Int
        var ubid: String
        var attemptID: String
        var createTime: String
        var difficulty: Int
        var challengeType: String

        enum CodingKeys: String, CodingKey {
            case version, ubid, difficulty
            case attemptID = "attempt_id"
            case createTime = "create_time"
            case challengeType = "challenge_type"
        }
    }

    enum Verdict: Sendable {
        case valid(InputDocument, ChallengeType)
        case expired
        case rejected(String)
    }

    private static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    let key: SymmetricKey
    let type: ChallengeType
    let difficulty: Int
    let memory: Int
    let lifetime: TimeInterval

    func issue(at now: Date) -> Challenge {
        let document = InputDocument(
            version: 1, ubid: UUID().uuidString.lowercased(), attemptID: UUID().uuidString.lowercased(),
            createTime: Self.timeStyle.format(now), difficulty: difficulty, challengeType: type.inputName)
        // Encoding a struct of strings and integers cannot fail.
        let json = try! JSONEncoder().encode(document)
        let input = Base64.encode(json).filter { $0 != "=" }
        return Challenge(
            input: input, hmac: Base64.encode(mac(input)), region: "local", type: type, difficulty: difficulty,
            memory: memory)
    }

    /// Checks signature, shape and age; the proof of work is checked by the caller.
    func check(input: String, hmac: String, at now: Date) -> Verdict {
        guard let given = Base64.decode(hmac), HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Array(input.utf8), using: key)
        else { return .rejected("the challenge's hmac does not match") }
        guard let json = Base64.decode(input), let document = try? JSONDecoder().decode(InputDocument.self, from: Data(json)),
            let type = ChallengeType.allCases.first(where: { $0.inputName == document.challengeType }),
            let created = try? Self.timeStyle.parse(document.createTime)
        else { return .rejected("the challenge input is malformed") }
        if now.timeIntervalSince(created) > lifetime { return .expired }
        return .valid(document, type)
    }

    private func mac(_ input: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: key))
    }
}
