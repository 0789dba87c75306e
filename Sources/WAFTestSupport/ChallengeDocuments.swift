import WAFChallenge

public let hmac32 = Base64.encode([UInt8](repeating: 7, count: 32))
public let challengeInput = Base64.encode(Array(#"{"version":1}"#.utf8))

/// A challenge document with `overrides` applied (nil removes a field).
public func challengeBody(_ overrides: [String: String?] = [:]) -> String {
    var fields: [String: String] = [
        "challenge": #"{"input":"\#(challengeInput)","hmac":"\#(hmac32)","region":"us-east-1"}"#,
        "challenge_type": "\"\(ChallengeType.sha256.id)\"",
        "difficulty": "8",
        "memory": "128",
    ]
    for (key, value) in overrides { fields[key] = value }
    return "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
}
