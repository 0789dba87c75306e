import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFDaemonTransport
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// Every error the daemon answers is a case of `DaemonError` (docs/socket-api.md, "Errors"). This
/// walks the catalog: for each kind, a request over a real socket (the API socket, a proxy's)
/// that reaches it, checked for its status, its code, its words and its headers. A kind added to
/// the catalog without a request here fails the walk.
@Suite("The error catalog, reached over real sockets", .offPool, .timeLimit(.minutes(3)))
struct ErrorCatalogTests {
    /// Kinds no request over a socket can reach on purpose, with the test that reaches them.
    static let reachedElsewhere: [DaemonError.Kind: String] = [
        // Between the steps of a reload only (a provider that took a new identity before its
        // entry did): the answer's own test holds the reload there.
        .identityChanged: "WAFSocketAPITests: \"a request that waited gets identityChanged when the identity moved under it\"",
        // A provider's state queue that does not answer within 2 s: waf-tokend-wedge does it
        // under systemd, whose watchdog then kills it (WAFSystemdTests); here it would hold the
        // daemon's stop for its whole bound.
        .unresponsive: "WAFSocketAPITests: \"/healthz answers unresponsive when a provider does not answer within 2 s\"",
        // A peer's share of limits.bufferedBytes full of upstream connections: the proxy's driver
        // test holds it there with a small budget (and MemoryBudgetTests under a real memory limit).
        .overBudget:
            "WAFTokenProxyTests/ProxyConnectionTests: \"TENANT12: a peer whose share of the budget is full gets 503 overBudget, and the connection goes on\"",
        // A forward proxy that refuses the proxy's CONNECT: the real squid's test (EGRESS-1).
        .egressRefused:
            "WAFTokenDaemonTests/Integrations/EgressTests: \"EGRESS3: a CONNECT squid refuses is a 502 egressRefused with its status; a token fetch's refused CONNECT, one sentence, retried\"",
    ]

    /// The kinds reached so far, each only once its answer was checked.
    final class Walk: Sendable {
        private let kinds = NIOLockedValueBox<Set<DaemonError.Kind>>([])
        var reached: Set<DaemonError.Kind> { kinds.withLockedValue { $0 } }

        /// Checks `answer` (curl -i's text, or a raw socket's) against `error`: status, code,
        /// `Cache-Control: no-store`, `Connection: close` when `closes`; `exact`: the message and
        /// header values too, else the message must start with `prefix` (where it carries words of
        /// NIO's, a time, or a URL).
        func check(
            _ error: DaemonError, _ answer: (code: Int, text: String), exact: Bool = true, prefix: String = "", closes: Bool = false,
            _ what: String
        ) {
            let expected = error.reply
            let parts = answer.text.components(separatedBy: "\r\n\r\n")
            let head = parts.first(where: { $0.hasPrefix("HTTP/1.1 \(answer.code)") }) ?? ""
            let body = parts.last ?? ""
            let value = json(body)
            let wanted = json(String(decoding: expected.body, as: UTF8.self))
            var good = answer.code == Int(expected.status.code) && value?["error"]?.string == error.code
            good = good && value?["reason"]?.string == error.kind.rawValue
            if exact { good = good && value?["message"]?.string == wanted?["message"]?.string }
            if !exact { good = good && value?["message"]?.string?.hasPrefix(prefix) == true }
            let lines = head.split(separator: "\r\n").map { $0.lowercased() }
            good = good && lines.contains("cache-control: no-store") && (!closes || lines.contains("connection: close"))
            for (name, field) in expected.headers where name != "Content-Type" {
                let line = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                good = good && line != nil && (!exact || line.map { $0.hasSuffix(" " + field) } == true)
            }
            #expect(good, "\(what): wanted \(error.kind) (\(expected.status.code)), got \(answer.code): \(answer.text.suffix(400))")
            if good { kinds.withLockedValue { _ = $0.insert(error.kind) } }
        }
    }

    @Test("every kind of DaemonError is reached by a request over a real socket, with its status, code, words and headers")
    func everyKindIsReached() async throws {
        let walk = Walk()
        try await Self.twoProvidersAndProxies(walk)
        try await Self.noTokenEver(walk)
        try await Self.stalledService(walk)
        let missing = Set(DaemonError.Kind.allCases).subtracting(walk.reached).subtracting(Self.reachedElsewhere.keys)
        #expect(missing.isEmpty, "no request reaches: \(missing.map(\.rawValue).sorted())")
        // The tests named for the rest exist.
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        for (kind, test) in Self.reachedElsewhere {
            // "Target: …" is that target's ErrorAnswersTests.swift; "Target/File: …" names the file.
            let place = String(test.prefix { $0 != ":" })
            let file = place.contains("/") ? "\(place).swift" : "\(place)/ErrorAnswersTests.swift"
            let source = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            let name = test.split(separator: "\"").dropFirst().first.map(String.init) ?? test
            #expect(source.contains("@Test(\"\(name)\")") && source.contains("\"error\":\"\(kind.rawValue)\""), "\(kind): \(test)")
        }
    }

    /// `curl -i` over a Unix socket, as `uid` (root unless given): the answer's code and its text.
    static func ask(_ socket: String, _ path: String, _ options: [String] = [], uid: UInt32 = 0) async throws -> (code: Int, text: String) {
        let answer = try await curlAs(uid: uid, socket, path, ["-i"] + options)
        return (answer.code, answer.body)
    }

    /// A raw request, for what curl will not send.
    static func raw(_ socket: String, _ request: String, timeout: Duration = .seconds(5)) throws -> (code: Int, text: String) {
        let connection = try RawSocket(path: socket)
        connection.send(request)
        let answer = connection.response(timeout: timeout)
        return (answer.status ?? 0, answer.text)
    }
}

extension ErrorCatalogTests {
    /// One value of each kind, for what depends on the kind alone (status, code).
    static let samples: [DaemonError] = [
        .headTooLarge, .unsupportedVersion, .malformed(""), .timedOut, .bodyTooLarge(limit: 1), .badTarget, .noSuchEndpoint(path: "/"),
        .methodNotAllowed(path: "/", allow: "GET"), .connectNotSupported, .socketForbidden, .proxyForbidden, .lifecycleForbidden,
        .providerForbidden(name: nil), .noneVisible(selector: "?provider=", choices: []), .bothSelectors, .providerRequired(choices: []),
        .unknownProvider(name: "", choices: []), .unknownDomain(domain: "", choices: []), .badWait("", maximum: 1), .badLifecycle,
        .badCookiePath(""), .badForwardedHeaders(""), .noToken, .noTokenWithinAuthWait,
        .fetchFailed(name: "the SdkError's name", description: "", retryAfter: 1), .identityChanged, .waitTimedOut(wait: ""), .cookieOff,
        .noCookie(path: "", cookiePath: ""), .stopping, .unresponsive, .notReady(named: []), .upstreamTimedOut(seconds: 1), .upstreamClosed,
        .upstreamUnreachable(url: ""), .overBudget, .egressRefused(proxy: "", target: "", status: 403),
    ]

    @Test("docs/socket-api.md lists every error of the catalog with its status and code")
    func documented() throws {
        #expect(Set(Self.samples.map(\.kind)) == Set(DaemonError.Kind.allCases), "one sample per kind")
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/socket-api.md")
        let rows = try String(contentsOf: page, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("| `") }
        for error in Self.samples {
            let code = error.kind == .fetchFailed ? error.code : "`\(error.code)`"
            let row = "| `\(error.kind.rawValue)` | \(error.reply.status.code) | \(code) |"
            #expect(rows.contains { $0.hasPrefix(row) }, "docs/socket-api.md has no row starting \(row)")
        }
    }
}
