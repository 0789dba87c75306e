import Crypto
import NIOCore
import NIOHTTP1
import WAFChallenge

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the handler does with a request.
enum Reply: Sendable {
    case send(HTTPResponseStatus, [(String, String)], [UInt8])
    /// Close the connection without an answer (fault injection).
    case drop
    /// Never answer (fault injection); the peer's timeout ends it.
    case stall
    /// Send the head, then the body one byte every `interval` (fault injection).
    case trickle(HTTPResponseStatus, [(String, String)], [UInt8], interval: TimeAmount)

    static func json(_ status: HTTPResponseStatus, _ value: some Encodable, headers: [(String, String)] = []) -> Reply {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(value)).map { Array($0) } ?? Array("{}".utf8)
        return .send(status, [("Content-Type", "application/json")] + headers, body)
    }

    static func error(_ status: HTTPResponseStatus, _ message: String) -> Reply {
        json(status, ["error": message])
    }
}

extension LocalTokenService {
    /// A token-service call was answered (or dropped).
    func callFinished() {
        state.withLockedValue { $0.counters.callsInFlight = max(0, $0.counters.callsInFlight - 1) }
    }

    /// Routes one request; `latency` is added before the answer goes out. Token-service calls
    /// (`isTokenServiceCall`) must be reported finished with `callFinished()`.
    /// `address`: the peer's, which a token is bound to when the service binds them (EGRESS-1).
    func reply(
        to request: NIOHTTPServerRequestFull, from address: String? = nil
    ) -> (reply: Reply, latencyMilliseconds: Int, isTokenServiceCall: Bool) {
        let head = request.head
        let path = String(head.uri.prefix { $0 != "?" })
        let body = request.body.map { Array($0.readableBytesView) } ?? []
        let now = Date()

        switch path {
        case pathPrefix + "/inputs", pathPrefix + "/edge/inputs":
            guard head.method == .GET else { return (.error(.methodNotAllowed, "use GET"), 0, false) }
            if path.hasSuffix("/edge/inputs"), configuration.redirectMaxAge == nil {
                return (.error(.notFound, "no such path"), 0, false)
            }
            let (reply, latency) = tokenServiceCall(.inputs, from: address) { inputs(uri: head.uri, path: path, now: now) }
            return (reply, latency, true)
        case pathPrefix + "/verify", pathPrefix + "/edge/verify":
            guard head.method == .POST else { return (.error(.methodNotAllowed, "use POST"), 0, false) }
            let (reply, latency) = tokenServiceCall(.verify, from: address) { verify(body: body, from: address, now: now) }
            return (reply, latency, true)
        case "/__admin/counters":
            return (.json(.ok, counters), 0, false)
        case "/__admin/tokens":
            return (.json(.ok, mintedTokens), 0, false)
        case "/__admin/faults":
            return (admin(faults: head.method, body: body), 0, false)
        case "/__admin/rotate":
            guard head.method == .POST else { return (.error(.methodNotAllowed, "use POST"), 0, false) }
            rotateKey()
            return (.json(.ok, ["rotated": true]), 0, false)
        case "/__admin/captcha":
            guard head.method == .POST else { return (.error(.methodNotAllowed, "use POST"), 0, false) }
            let on = String(decoding: body, as: UTF8.self).contains("true")
            askForCaptcha(on)
            return (.json(.ok, ["captcha": on]), 0, false)
        case "/__admin/bind-addresses":
            guard head.method == .POST else { return (.error(.methodNotAllowed, "use POST"), 0, false) }
            let on = String(decoding: body, as: UTF8.self).contains("true")
            state.withLockedValue { $0.bindTokensToAddresses = on }
            return (.json(.ok, ["bindTokensToAddresses": on]), 0, false)
        case "/__admin/reset":
            guard head.method == .POST else { return (.error(.methodNotAllowed, "use POST"), 0, false) }
            reset(counters: true)
            return (.json(.ok, ["reset": true]), 0, false)
        default:
            if path == "/protected" || path.hasPrefix("/protected/") {
                guard [.GET, .HEAD, .POST, .PUT].contains(head.method) else {
                    return (.error(.methodNotAllowed, "use GET, HEAD, POST or PUT"), 0, false)
                }
                // `?delayMs=N`: a slow upstream, for the proxy's tests.
                let delay =
                    head.uri.split(separator: "?").dropFirst().first?.split(separator: "&")
                    .first { $0.hasPrefix("delayMs=") }.flatMap { Int($0.dropFirst("delayMs=".count)) } ?? 0
                if let fault = takeFault(for: .protected) { return (injected(fault, now: now).0, delay, false) }
                return (protected(head, path: path, body: body, from: address, now: now), delay, false)
            }
            return (.error(.notFound, "no such path"), 0, false)
        }
    }

    /// Applies an armed fault to `endpoint`, or answers normally; records the call either way.
    private func tokenServiceCall(_ endpoint: Endpoint, from address: String?, _ answer: () -> (Reply, String)) -> (Reply, Int) {
        let latency = state.withLockedValue { state -> Int in
            if endpoint == .inputs { state.counters.inputs += 1 } else { state.counters.verify += 1 }
            state.counters.callsInFlight += 1
            state.counters.maxCallsInFlight = max(state.counters.maxCallsInFlight, state.counters.callsInFlight)
            return state.latencyMilliseconds
        }
        let fault = takeFault(for: endpoint)
        let (reply, outcome) = fault.map { injected($0, now: Date()) } ?? answer()
        let status: Int? = if case .send(let status, _, _) = reply { Int(status.code) } else { nil }
        state.withLockedValue { $0.counters.record(endpoint, status: status, outcome: outcome, from: address) }
        return (reply, latency)
    }

    /// The first armed fault for `endpoint`, counted down; nil when none.
    private func takeFault(for endpoint: Endpoint) -> FaultRule? {
        state.withLockedValue { state -> FaultRule? in
            let index = state.faults.firstIndex { rule in
                rule.count > 0 && rule.target.matches(endpoint) && !(rule.kind == .expired && endpoint == .inputs)
            }
            guard let index else { return nil }
            state.faults[index].count -= 1
            let rule = state.faults[index]
            if rule.count == 0 { state.faults.remove(at: index) }
            state.counters.faultsApplied += 1
            return rule
        }
    }

    private func injected(_ rule: FaultRule, now: Date) -> (Reply, String) {
        let label = "fault: \(rule.kind.rawValue)"
        switch rule.kind {
        case .fail:
            return (.error(HTTPResponseStatus(statusCode: rule.status ?? 503), "injected failure"), label)
        case .drop:
            return (.drop, label)
        case .stall:
            return (.stall, label)
        case .malformed:
            return (.send(.ok, [("Content-Type", "application/json")], Array(#"{"challenge": {"input": "#.utf8)), label)
        case .expired:
            return (.json(.ok, ["inputs": challenges.issue(at: now).document]), label)
        case .body:
            let status = HTTPResponseStatus(statusCode: rule.status ?? 200)
            return (.send(status, [("Content-Type", "application/json")], Array((rule.body ?? "").utf8)), label)
        case .oversized:
            return (.send(.ok, [("Content-Type", "application/json")], [UInt8](repeating: 0x20, count: 1 << 20) + Array("{}".utf8)), label)
        case .trickle:
            let body = [UInt8](repeating: 0x20, count: 998) + Array("{}".utf8)
            return (
                .trickle(.ok, [("Content-Type", "application/json")], body, interval: .milliseconds(Int64(rule.intervalMilliseconds ?? 500))), label
            )
        }
    }

    // MARK: The token service

    private func inputs(uri: String, path: String, now: Date) -> (Reply, String) {
        if let maxAge = configuration.redirectMaxAge, !path.hasSuffix("/edge/inputs") {
            // Like a CloudFront-fronted web ACL: the regional URL sends the client elsewhere.
            let query = uri.drop { $0 != "?" }
            state.withLockedValue { $0.counters.redirects += 1 }
            let headers = [("Location", pathPrefix + "/edge/inputs" + query), ("Cache-Control", "max-age=\(maxAge)")]
            return (.send(.temporaryRedirect, headers, []), "redirect")
        }
        return (.json(.ok, challenges.issue(at: now).document), "challenge")
    }

    private func verify(body: [UInt8], from address: String?, now: Date) -> (Reply, String) {
        func rejected(_ status: HTTPResponseStatus, _ reason: String) -> (Reply, String) {
            state.withLockedValue { $0.counters.verifyRejected += 1 }
            logger.info("verify rejected", metadata: ["reason": "\(reason)"])
            return (.error(status, reason), "rejected: \(reason)")
        }
        guard let request = try? JSONDecoder().decode(VerifyRequest.self, from: Data(body)) else {
            return rejected(.badRequest, "the body is not a verify request")
        }
        guard request.solution.utf8.count <= 32, !request.checksum.isEmpty, request.checksum.utf8.count <= 256 else {
            return rejected(.badRequest, "solution or checksum out of bounds")
        }
        let document: ChallengeIssuer.InputDocument
        let type: ChallengeType
        switch challenges.check(input: request.challenge.input, hmac: request.challenge.hmac, at: now) {
        case .rejected(let reason):
            return rejected(.forbidden, reason)
        case .expired:
            state.withLockedValue { $0.counters.challengesExpired += 1 }
            return (.json(.ok, ["inputs": challenges.issue(at: now).document]), "expired")
        case .valid(let input, let inputType):
            (document, type) = (input, inputType)
        }
        let domain = request.domain.lowercased()
        guard configuration.tokenDomains.contains(where: { domain == $0 || domain.hasSuffix("." + $0) }) else {
            return rejected(.forbidden, "the domain \(domain) is not on the token domain list")
        }
        let work = ProofOfWork(
            type: type, input: request.challenge.input, checksum: request.checksum, difficulty: document.difficulty,
            memory: configuration.memory, nonceFormat: .decimal)
        guard work.isSolved(by: request.solution) else { return rejected(.forbidden, "wrong solution") }
        let fresh = state.withLockedValue { $0.usedAttempts.insert(document.attemptID).inserted }
        guard fresh else { return rejected(.forbidden, "the challenge was already used") }
        let token = tokens.mint(
            domain: domain, attemptID: document.attemptID, ubid: document.ubid, client: request.client,
            existing: request.existingToken, at: now)
        state.withLockedValue { state in
            state.counters.tokensIssued += 1
            state.minted.append(token)
            if state.minted.count > 1000 { state.minted.removeFirst() }
            // Where each token was acquired, for the protected resource's reuse rule.
            if let address { state.acquiredFrom[token] = address }
            if state.acquiredFrom.count > 1000 { state.acquiredFrom.removeAll() }
        }
        return (.json(.ok, ["token": token]), "token")
    }

    // MARK: Administration

    private func admin(faults method: HTTPMethod, body: [UInt8]) -> Reply {
        switch method {
        case .GET:
            return .json(.ok, state.withLockedValue { $0.faults })
        case .DELETE:
            reset()
            return .json(.ok, ["reset": true])
        case .POST:
            struct Latency: Decodable { let latencyMilliseconds: Int }
            let decoder = JSONDecoder()
            if let rules = try? decoder.decode([FaultRule].self, from: Data(body)) {
                rules.forEach(addFault)
            } else if let rule = try? decoder.decode(FaultRule.self, from: Data(body)) {
                addFault(rule)
            } else if let latency = try? decoder.decode(Latency.self, from: Data(body)) {
                setLatency(milliseconds: latency.latencyMilliseconds)
            } else {
                return .error(.badRequest, "expected a fault rule, a list of them, or {\"latencyMilliseconds\": N}")
            }
            return .json(.ok, state.withLockedValue { $0.faults })
        default:
            return .error(.methodNotAllowed, "use GET, POST or DELETE")
        }
    }
}

extension String {
    func leftPadded(to length: Int) -> String { String(repeating: "0", count: max(0, length - count)) + self }
}
