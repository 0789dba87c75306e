import Crypto
import WAFChallenge

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Mints tokens in the real shape, `<uuid>:<base64 of 12 bytes>:<base64 blob>`, with domain, mint
/// time and a MAC inside the blob, so that the service can check them later.
struct TokenIssuer: Sendable {
    struct Claims: Codable, Sendable, Hashable {
        var version: Int
        var domain: String
        var mintedAtMilliseconds: Int64
        var attemptID: String
        var ubid: String
        var client: String

        enum CodingKeys: String, CodingKey {
            case version = "v"
            case domain = "d"
            case mintedAtMilliseconds = "t"
            case attemptID = "a"
            case ubid = "u"
            case client = "c"
        }
    }

    enum Verdict: Sendable, Equatable {
        case valid(Claims)
        case invalid(String)
    }

    let key: SymmetricKey
    let immunity: TimeInterval

    /// A new token; renewing `existing` (when it is valid) keeps its identifier, as AWS does.
    func mint(domain: String, attemptID: String, ubid: String, client: String, existing: String?, at now: Date) -> String {
        var identifier = UUID().uuidString.lowercased()
        if let existing, case .valid = check(existing, at: now, ignoringAge: true),
            let previous = existing.split(separator: ":").first
        {
            identifier = String(previous)
        }
        let claims = Claims(
            version: 1, domain: domain, mintedAtMilliseconds: Int64(now.timeIntervalSince1970 * 1000),
            attemptID: attemptID, ubid: ubid, client: client)
        let payload = Array(try! JSONEncoder().encode(claims))
        let nonce = (0..<12).map { _ in UInt8.random(in: .min ... .max) }
        let blob = payload + mac(identifier: identifier, nonce: nonce, payload: payload)
        return "\(identifier):\(Base64.encode(nonce)):\(Base64.encode(blob))"
    }

    func check(_ token: String, at now: Date, ignoringAge: Bool = false) -> Verdict {
        let parts = token.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, UUID(uuidString: String(parts[0])) != nil else { return .invalid("not a token") }
        guard let nonce = Base64.decode(String(parts[1])), nonce.count == 12,
            let blob = Base64.decode(String(parts[2])), blob.count > 32
        else { return .invalid("not a token") }
        let payload = Array(blob.dropLast(32))
        let signed = Array(String(parts[0]).utf8) + nonce + payload
        guard HMAC<SHA256>.isValidAuthenticationCode(Array(blob.suffix(32)), authenticating: signed, using: key) else {
            return .invalid("the token's MAC does not match")
        }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: Data(payload)) else {
            return .invalid("the token's claims are malformed")
        }
        let age = now.timeIntervalSince1970 - Double(claims.mintedAtMilliseconds) / 1000
        if !ignoringAge, age > immunity { return .invalid("the token is older than the immunity time") }
        return .valid(claims)
    }

    private func mac(identifier: String, nonce: [UInt8], payload: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(identifier.utf8) + nonce + payload, using: key))
    }
}
