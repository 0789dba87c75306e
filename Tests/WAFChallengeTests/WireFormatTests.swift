import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFTestSupport
import WAFTestTraits

private func problem(_ body: String) -> String? {
    do {
        _ = try Challenge(parsing: Array(body.utf8))
        return nil
    } catch {
        return error.description
    }
}

@Suite("Wire format and bad input", .offPool)
struct WireFormatTests {
    @Test("a well-formed challenge is read field by field; memory defaults to 128")
    func wellFormed() throws {
        let challenge = try Challenge(parsing: Array(challengeBody(["memory": nil]).utf8))
        #expect(challenge.type == .sha256)
        #expect(challenge.difficulty == 8)
        #expect(challenge.memory == 128)
        #expect(challenge.region == "us-east-1")
        #expect(challenge.input == challengeInput)
    }

    @Test(
        "bad challenges are clear errors, never crashes",
        arguments: [
            ("{\"challenge\": ", "the body is not JSON"),
            ("[1,2]", "the challenge is an array, not an object"),
            (challengeBody(["challenge": nil]), "challenge is missing or not an object"),
            (challengeBody(["challenge": #"{"input":"%%%not base64","hmac":"\#(hmac32)"}"#]), "challenge.input is not base64"),
            (challengeBody(["challenge": #"{"input":"\#(challengeInput)","hmac":"@@@"}"#]), "challenge.hmac is not base64"),
            (challengeBody(["challenge": #"{"input":"\#(challengeInput)","hmac":"AAAA"}"#]), "challenge.hmac decodes to 3 bytes, not 32"),
            (challengeBody(["challenge": #"{"input":5,"hmac":"\#(hmac32)"}"#]), "challenge.input is missing or not a non-empty string"),
            (challengeBody(["difficulty": "33"]), "difficulty 33 is outside 0…32"),
            (challengeBody(["difficulty": "-1"]), "difficulty -1 is outside 0…32"),
            (challengeBody(["difficulty": "8.5"]), "difficulty is missing or not an integer"),
            (challengeBody(["difficulty": "\"8\""]), "difficulty is missing or not an integer"),
            (challengeBody(["challenge_type": "\"h000\""]), "challenge_type h000 is not a type this client knows"),
            (challengeBody(["challenge_type": "\"\(ChallengeType.networkBandwidth.id)\""]), "the network-bandwidth challenge is for browsers only"),
            (
                challengeBody(["challenge_type": "\"\(ChallengeType.scrypt.id)\"", "memory": "100"]),
                "scrypt memory 100 is not a power of two in 2...65536"
            ),
            (challengeBody(["memory": "\"lots\""]), "memory is not an integer"),
        ])
    func badChallenges(body: String, expected: String) {
        #expect(problem(body) == expected)
    }

    @Test("CANARY6: what the solver cannot solve is counted by kind: an unknown type, an unknown difficulty shape, a CAPTCHA; not a malformed answer")
    func CANARY6_unsolvableByKind() {
        let kinds: [(String, String?)] = [
            (challengeBody(["challenge_type": "\"h000\""]), "unknownType"),
            (challengeBody(["challenge_type": "\"\(ChallengeType.networkBandwidth.id)\""]), "unknownType"),
            (challengeBody(["challenge_type": "\"captcha-v2\""]), "captcha"),
            (challengeBody(["difficulty": "33"]), "unknownDifficulty"),
            (challengeBody(["challenge_type": "\"\(ChallengeType.scrypt.id)\"", "memory": "100"]), "unknownDifficulty"),
            (challengeBody(["challenge": #"{"input":"%%%not base64","hmac":"\#(hmac32)"}"#]), nil),
            ("[1,2]", nil),
        ]
        for (body, kind) in kinds {
            #expect(UnsolvableChallenge.reason(problem(body) ?? "") == kind, "\(problem(body) ?? "")")
        }
    }

    @Test("verify answers: a token, a fresh challenge, or a clear error")
    func verifyAnswers() throws {
        #expect(try VerifyOutcome(parsing: Array(#"{"token":"abc:def"}"#.utf8)) == .token("abc:def"))
        if case .freshChallenge(let fresh) = try VerifyOutcome(parsing: Array(#"{"inputs":\#(challengeBody())}"#.utf8)) {
            #expect(fresh.difficulty == 8)
        } else {
            Issue.record("expected a fresh challenge")
        }
        let bad: [(String, String)] = [
            (#"{"token": 5}"#, "token is a number, not a string"),
            (#"{"token": null}"#, "token is null, not a string"),
            (#"{"token": "has space"}"#, "token is not a usable cookie value (9 bytes)"),
            (#"{"token": ""}"#, "token is not a usable cookie value (0 bytes)"),
            (#"{"ok": true}"#, "the verify answer holds neither token nor inputs"),
            ("<html>", "the verify answer is not JSON"),
            (#""token""#, "the verify answer is a string, not an object"),
        ]
        for (body, expected) in bad {
            #expect(throws: ChallengeError(expected)) { try VerifyOutcome(parsing: Array(body.utf8)) }
        }
    }

    @Test("the verify request has the fields of the spec; existing_token is omitted when there is none")
    func verifyRequestShape() throws {
        let challenge = try Challenge(parsing: Array(challengeBody().utf8))
        let request = VerifyRequest(
            challenge: challenge, solution: "141", client: "ios", checksum: VerifyRequest.mobileChecksum,
            domain: "example.com", existingToken: nil,
            metrics: [.init(name: "ChallengeExecutionTime", value: 12.5, unit: "Milliseconds")])
        let document = try #require(JSONValue.parse(try request.encoded()))
        #expect(document["solution"] == .string("141"))
        #expect(document["client"] == .string("ios"))
        #expect(document["domain"] == .string("example.com"))
        #expect(document["checksum"] == .string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        #expect(document["challenge"]?["input"] == .string(challenge.input))
        #expect(document["challenge"]?["hmac"] == .string(challenge.hmac))
        #expect(document["signals"] == .array([]))
        #expect(document["existing_token"] == nil)
        #expect(
            document["metrics"]
                == .array([.object(["name": .string("ChallengeExecutionTime"), "value": .number(12.5), "unit": .string("Milliseconds")])]))
        var renewing = request
        renewing.existingToken = "old"
        #expect(JSONValue.parse(try renewing.encoded())?["existing_token"] == .string("old"))
    }
}
