import Crypto
import NIOCore
import NIOHTTP1
import WAFChallenge

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension LocalTokenService {
    // MARK: The protected resource

    /// Answers like AWS WAF behind a Challenge rule: 200 with a valid token, else 202 and
    /// `x-amzn-waf-action: challenge`. A body is answered with its size and SHA-256, so that a
    /// client can tell it arrived whole.
    func protected(_ head: HTTPRequestHead, path: String, body: [UInt8], from address: String?, now: Date) -> Reply {
        let token = head.headers["x-aws-waf-token"].first ?? Self.cookie(named: "aws-waf-token", in: head.headers)
        let host = Self.hostName(head.headers["Host"].first ?? "")
        let (rotatedAt, captcha, binds) = state.withLockedValue { ($0.rotatedAt, $0.captcha, $0.bindTokensToAddresses) }
        let acquired = token.flatMap { token in state.withLockedValue { $0.acquiredFrom[token] } }
        if captcha {
            state.withLockedValue {
                $0.counters.protectedChallenged += 1
                $0.counters.record(.protected, status: 405, outcome: "captcha", from: address)
            }
            return .send(.methodNotAllowed, [("x-amzn-waf-action", "captcha"), ("Content-Type", "text/plain")], Array("captcha\n".utf8))
        }
        var verdict = "no token"
        if let token {
            switch tokens.check(token, at: now) {
            case .invalid(let reason):
                verdict = reason
            case .valid(let claims) where rotatedAt.map({ Double(claims.mintedAtMilliseconds) / 1000 < $0.timeIntervalSince1970 }) == true:
                verdict = "the token was minted before the web ACL's key rotated"
            case .valid where binds && acquired != nil && acquired != address:
                // Bot Control's TGT_TokenReuseIp: a token seen from another address than the one
                // it was acquired from.
                verdict = "the token was acquired from \(acquired ?? "?") and is used from \(address ?? "?")"
                state.withLockedValue { $0.counters.protectedReused += 1 }
            case .valid(let claims):
                // The token's domain must be the request's host, or on the token domain list and
                // then also good for its subdomains.
                let listed = configuration.tokenDomains.contains(claims.domain)
                if claims.domain == host || (listed && host.hasSuffix("." + claims.domain)) {
                    state.withLockedValue {
                        $0.counters.protectedAllowed += 1
                        $0.counters.record(.protected, status: 200, outcome: "allowed", from: address)
                    }
                    var answer = ["ok": "true", "path": path]
                    // The names of the other cookies that came with it: a proxy in front must keep them.
                    let others = head.headers["Cookie"].flatMap { $0.split(separator: ";") }.compactMap { pair in
                        pair.split(separator: "=", maxSplits: 1).first.map { $0.filter { $0 != " " } }
                    }.filter { $0 != "aws-waf-token" }
                    if !others.isEmpty { answer["cookies"] = others.joined(separator: ",") }
                    if !body.isEmpty {
                        answer["bodyBytes"] = String(body.count)
                        answer["bodySHA256"] = SHA256.hash(data: body).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
                    }
                    return .json(.ok, answer)
                }
                verdict = "the token is for \(claims.domain), not \(host)"
            }
        }
        state.withLockedValue {
            $0.counters.protectedChallenged += 1
            $0.counters.record(.protected, status: 202, outcome: "challenged", from: address)
        }
        logger.debug("protected resource challenged", metadata: ["reason": "\(verdict)"])
        return .send(.accepted, [("x-amzn-waf-action", "challenge"), ("Content-Type", "text/plain")], Array("challenge\n".utf8))
    }

    static func cookie(named name: String, in headers: HTTPHeaders) -> String? {
        for header in headers["Cookie"] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingPrefix(" ") == name { return String(parts[1]) }
            }
        }
        return nil
    }

    /// The host of a Host header, without port or IPv6 brackets, in lower case.
    static func hostName(_ header: String) -> String {
        let lowered = header.lowercased()
        if lowered.hasPrefix("[") { return String(lowered.dropFirst().prefix { $0 != "]" }) }
        return String(lowered.prefix { $0 != ":" })
    }
}
