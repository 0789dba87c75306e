import Crypto
import Foundation
import NIOHTTP1
import Testing
import WAFChallenge
import WAFJSON
import WAFTestTraits

@testable import WAFLocalTokenService

@Suite("Local token service: challenges and tokens", .offPool)
struct LocalTokenServiceIssuerTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let challenges = ChallengeIssuer(key: SymmetricKey(size: .bits256), type: .pbkdf2, difficulty: 6, memory: 128, lifetime: 120)
    let tokens = TokenIssuer(key: SymmetricKey(size: .bits256), immunity: 300)

    @Test("challenges are signed, carry the AWS input document, and expire")
    func challengeLifecycle() throws {
        let challenge = challenges.issue(at: now)
        #expect(challenge.type == .pbkdf2 && challenge.difficulty == 6)
        // What a client sees parses as a valid challenge.
        #expect(try Challenge(challenge.document) == challenge)
        let document = try #require(JSONValue.parse(Base64.decode(challenge.input)!))
        #expect(document["challenge_type"] == .string("HashcashPBKDF2"))
        #expect(document["version"] == .number(1))
        #expect(document["attempt_id"]?.string?.count == 36)

        guard case .valid = challenges.check(input: challenge.input, hmac: challenge.hmac, at: now.addingTimeInterval(120)) else {
            Issue.record("a challenge is good for its whole lifetime")
            return
        }
        guard case .expired = challenges.check(input: challenge.input, hmac: challenge.hmac, at: now.addingTimeInterval(121)) else {
            Issue.record("a challenge past its lifetime is expired")
            return
        }
        let other = challenges.issue(at: now)
        guard case .rejected(let reason) = challenges.check(input: challenge.input, hmac: other.hmac, at: now) else {
            Issue.record("a foreign hmac is rejected")
            return
        }
        #expect(reason == "the challenge's hmac does not match")
    }

    @Test("tokens have the real shape and are checked by MAC, domain and immunity time")
    func tokenLifecycle() throws {
        let (attempt, ubid) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
        let token = tokens.mint(domain: "example.com", attemptID: attempt, ubid: ubid, client: "ios", existing: nil, at: now)
        let parts = token.split(separator: ":")
        #expect(parts.count == 3)
        #expect(UUID(uuidString: String(parts[0])) != nil)
        #expect(Base64.decode(String(parts[1]))?.count == 12)
        #expect((250...340).contains(token.count), "\(token.count) characters")
        #expect(VerifyOutcome.isUsableToken(token))

        guard case .valid(let claims) = tokens.check(token, at: now.addingTimeInterval(300)) else {
            Issue.record("valid within the immunity time")
            return
        }
        #expect(claims.domain == "example.com")
        #expect(tokens.check(token, at: now.addingTimeInterval(301)) == .invalid("the token is older than the immunity time"))

        var tampered = Array(token)
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == "A" ? "B" : "A"
        #expect(tokens.check(String(tampered), at: now) != .valid(claims))
        #expect(tokens.check("not-a-token", at: now) == .invalid("not a token"))
        let foreign = TokenIssuer(key: SymmetricKey(size: .bits256), immunity: 300)
        #expect(foreign.check(token, at: now) == .invalid("the token's MAC does not match"))

        // Renewal keeps the identifier, as AWS does with existing_token.
        let renewed = tokens.mint(domain: "example.com", attemptID: attempt, ubid: ubid, client: "ios", existing: token, at: now)
        #expect(renewed.split(separator: ":")[0] == parts[0])
        #expect(renewed != token)
    }

    @Test("the protected resource reads the host without port and the cookie among others")
    func requestParsing() {
        #expect(LocalTokenService.hostName("127.0.0.1:8080") == "127.0.0.1")
        #expect(LocalTokenService.hostName("Example.COM") == "example.com")
        #expect(LocalTokenService.hostName("[::1]:443") == "::1")
        let headers = HTTPHeaders([("Cookie", "a=1; aws-waf-token=abc:d=e; b=2")])
        #expect(LocalTokenService.cookie(named: "aws-waf-token", in: headers) == "abc:d=e")
    }
}
