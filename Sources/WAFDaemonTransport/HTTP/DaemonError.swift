import NIOHTTP1

/// Every error the daemon answers, on every listener (the socket API, the proxies, forward auth,
/// the probes): each case has its status, its code, its sentence and its headers here, and
/// nothing else writes an error answer. A new one is a case, a `Kind`, and its line in `reply`;
/// `ErrorCatalogTests` sends a request that reaches each kind over a real socket, and fails on a
/// kind it has no request for. The words are in docs/socket-api.md, "Errors".
package enum DaemonError: Error, Equatable, Sendable {
    // Reading the request, the same on every listener.
    /// 431: the head is larger than `HTTPLimits.maximumHeadBytes`, or has too many fields.
    case headTooLarge
    /// 505: a version other than HTTP/1.0 and 1.1.
    case unsupportedVersion
    /// 400, with why.
    case malformed(String)
    /// 408: the request (head or body) did not arrive within the request timeout.
    case timedOut
    /// 413: a body over `limit` bytes.
    case bodyTooLarge(limit: Int)
    /// 400: a target that is not a path with a well-formed query.
    case badTarget

    // Routing.
    case noSuchEndpoint(path: String)
    case methodNotAllowed(path: String, allow: String)
    /// The proxy forwards to its one upstream.
    case connectNotSupported

    // Who may ask (TENANT-5, TENANT-6, MULTI-7).
    case socketForbidden
    case proxyForbidden
    case lifecycleForbidden
    /// A provider the peer may not use; its name when the request named it.
    case providerForbidden(name: String?)
    /// No provider the peer may use matches the selector; `choices` are those it may use.
    case noneVisible(selector: String, choices: [String])

    // Which provider (MULTI-2).
    case bothSelectors
    case providerRequired(choices: [String])
    case unknownProvider(name: String, choices: [String])
    case unknownDomain(domain: String, choices: [String])

    // What the request says.
    case badWait(String, maximum: Int)
    case badLifecycle
    case badCookiePath(String)
    /// Forwarding headers that disagree, or are malformed (TENANT-13).
    case badForwardedHeaders(String)

    // The token.
    case noToken
    case noTokenWithinAuthWait
    /// A fetch failed: the SdkError's name and description, and when to ask again.
    case fetchFailed(name: String, description: String, retryAfter: Int)
    case identityChanged
    case waitTimedOut(wait: String)
    case cookieOff
    case noCookie(path: String, cookiePath: String)

    // The daemon.
    case stopping
    case unresponsive
    /// The providers that have no fresh token, among those the peer may see.
    case notReady(named: [String])

    // The upstream, for a proxy.
    case upstreamTimedOut(seconds: Int64)
    case upstreamClosed
    case upstreamUnreachable(url: String)
    /// 503: the peer's connections hold their share of `limits.bufferedBytes` (TENANT-12).
    case overBudget
    /// 502: the forward proxy (`egress.proxy`, at `proxy`) answered `CONNECT` with `status` (EGRESS-1).
    case egressRefused(proxy: String, target: String, status: Int)

    /// A line ending in a bare LF, in the words every listener uses.
    package static let bareLineFeed = DaemonError.malformed("a line ends in a bare LF; HTTP lines end in CRLF")

    /// The cases without their values: what the catalog's test walks.
    package enum Kind: String, CaseIterable, Sendable {
        case headTooLarge, unsupportedVersion, malformed, timedOut, bodyTooLarge, badTarget
        case noSuchEndpoint, methodNotAllowed, connectNotSupported
        case socketForbidden, proxyForbidden, lifecycleForbidden, providerForbidden, noneVisible
        case bothSelectors, providerRequired, unknownProvider, unknownDomain
        case badWait, badLifecycle, badCookiePath, badForwardedHeaders
        case noToken, noTokenWithinAuthWait, fetchFailed, identityChanged, waitTimedOut, cookieOff, noCookie
        case stopping, unresponsive, notReady
        case upstreamTimedOut, upstreamClosed, upstreamUnreachable, overBudget, egressRefused
    }

    package var kind: Kind {
        switch self {
        case .headTooLarge: .headTooLarge
        case .unsupportedVersion: .unsupportedVersion
        case .malformed: .malformed
        case .timedOut: .timedOut
        case .bodyTooLarge: .bodyTooLarge
        case .badTarget: .badTarget
        case .noSuchEndpoint: .noSuchEndpoint
        case .methodNotAllowed: .methodNotAllowed
        case .connectNotSupported: .connectNotSupported
        case .socketForbidden: .socketForbidden
        case .proxyForbidden: .proxyForbidden
        case .lifecycleForbidden: .lifecycleForbidden
        case .providerForbidden: .providerForbidden
        case .noneVisible: .noneVisible
        case .bothSelectors: .bothSelectors
        case .providerRequired: .providerRequired
        case .unknownProvider: .unknownProvider
        case .unknownDomain: .unknownDomain
        case .badWait: .badWait
        case .badLifecycle: .badLifecycle
        case .badCookiePath: .badCookiePath
        case .badForwardedHeaders: .badForwardedHeaders
        case .noToken: .noToken
        case .noTokenWithinAuthWait: .noTokenWithinAuthWait
        case .fetchFailed: .fetchFailed
        case .identityChanged: .identityChanged
        case .waitTimedOut: .waitTimedOut
        case .cookieOff: .cookieOff
        case .noCookie: .noCookie
        case .stopping: .stopping
        case .unresponsive: .unresponsive
        case .notReady: .notReady
        case .upstreamTimedOut: .upstreamTimedOut
        case .upstreamClosed: .upstreamClosed
        case .upstreamUnreachable: .upstreamUnreachable
        case .overBudget: .overBudget
        case .egressRefused: .egressRefused
        }
    }

    /// The answer: a status, JSON `{"error", "reason", "message"}`, and the headers the case
    /// needs. `error` is the code scripts matched on before `reason` existed (several cases share
    /// `badRequest` or `forbidden`); `reason` is the case's own name, stable and one per case.
    package var reply: HTTPReply {
        let (status, code, message, headers) = parts
        return .json(status, ["error": code, "reason": kind.rawValue, "message": message], headers: headers)
    }

    /// The `error` field of the answer's JSON: what scripts match on.
    package var code: String { parts.code }

    private var parts: (status: HTTPResponseStatus, code: String, message: String, headers: [(String, String)]) {
        let again = [("Retry-After", "1")]
        func named(_ choices: [String]) -> String { choices.isEmpty ? "" : " (providers: \(choices.joined(separator: ", ")))" }
        switch self {
        case .headTooLarge:
            return (.requestHeaderFieldsTooLarge, "requestHeaderFieldsTooLarge", "the request head exceeds \(HTTPLimits.maximumHeadBytes) bytes", [])
        case .unsupportedVersion: return (.httpVersionNotSupported, "httpVersionNotSupported", "use HTTP/1.1", [])
        case .malformed(let why): return (.badRequest, "badRequest", "malformed request: \(why)", [])
        case .timedOut: return (.requestTimeout, "requestTimeout", "the request did not arrive in time", [])
        case .bodyTooLarge(let limit): return (.payloadTooLarge, "payloadTooLarge", "request bodies are limited to \(limit) bytes", [])
        case .badTarget: return (.badRequest, "badRequest", "the request target is not a path with a well-formed query", [])
        case .noSuchEndpoint(let path): return (.notFound, "notFound", "no such endpoint: \(path.prefix(200))", [])
        case .methodNotAllowed(let path, let allow): return (.methodNotAllowed, "methodNotAllowed", "\(path) allows \(allow)", [("Allow", allow)])
        case .connectNotSupported:
            return (.methodNotAllowed, "methodNotAllowed", "the proxy forwards to its one upstream; CONNECT is not supported", [])
        case .socketForbidden:
            return (.forbidden, "forbidden", "this user may not use the socket (socket.allowedUsers, socket.allowedGroups)", [])
        case .proxyForbidden: return (.forbidden, "forbidden", "this user may not use the proxy (proxy.allowedUsers, proxy.allowedGroups)", [])
        case .lifecycleForbidden:
            return (
                .forbidden, "forbidden",
                "the lifecycle moves every provider: this user must be allowed for all of them, or be in lifecycle.allowedUsers or lifecycle.allowedGroups",
                []
            )
        case .providerForbidden(let name):
            let which = name.map { "provider \($0)" } ?? "the provider this request means"
            return (.forbidden, "forbidden", "this user may not use \(which) (its allowedUsers, allowedGroups)", [])
        case .noneVisible(let selector, let choices):
            return (
                .forbidden, "forbidden", "no provider this user may use matches this \(selector) (allowedUsers, allowedGroups)\(named(choices))", []
            )
        case .bothSelectors: return (.badRequest, "badRequest", "ask for one provider: ?provider=NAME or ?domain=HOST, not both", [])
        case .providerRequired(let choices):
            return (
                .badRequest, "providerRequired", "this daemon runs several providers: ask with ?provider=NAME or ?domain=HOST\(named(choices))", []
            )
        case .unknownProvider(let name, let choices):
            return (.notFound, "unknownProvider", "no provider named \(name.prefix(64).debugDescription)\(named(choices))", [])
        case .unknownDomain(let domain, let choices):
            return (.notFound, "unknownDomain", "no provider covers \(domain.prefix(256).debugDescription)\(named(choices))", [])
        case .badWait(let text, let maximum):
            return (
                .badRequest, "badRequest", "wait must be a number of seconds above 0 and at most \(maximum), not \(text.prefix(40).debugDescription)",
                []
            )
        case .badLifecycle: return (.badRequest, "badRequest", "the body must be foreground, background or closed", [])
        case .badCookiePath(let path): return (.badRequest, "badRequest", "path must start with /, not \(path.prefix(80).debugDescription)", [])
        case .badForwardedHeaders(let why): return (.badRequest, "badRequest", why, [])
        case .noToken: return (.serviceUnavailable, "noToken", "no token is cached yet; retry shortly or ask with ?wait=SECONDS", again)
        case .noTokenWithinAuthWait:
            return (.serviceUnavailable, "noToken", "no token within auth.tokenWaitSec; the provider goes on trying", again)
        case .fetchFailed(let name, let description, let retryAfter):
            return (.serviceUnavailable, name, description, [("Retry-After", "\(retryAfter)")])
        case .identityChanged:
            return (.serviceUnavailable, "identityChanged", "the provider's identity changed while this request waited; ask again", again)
        case .waitTimedOut(let wait): return (.gatewayTimeout, "timeout", "no token within \(wait) s; the provider goes on trying", [])
        case .cookieOff: return (.notFound, "noCookie", "the token cookie is off (setTokenCookie: false)", [])
        case .noCookie(let path, let cookiePath):
            return (.notFound, "noCookie", "no cookie applies to \(path.prefix(200)) (tokenCookiePath is \(cookiePath))", [])
        case .stopping: return (.serviceUnavailable, "shuttingDown", "the daemon is stopping", again)
        case .unresponsive: return (.serviceUnavailable, "unresponsive", "a provider did not answer within 2 s", [])
        case .notReady(let named):
            let which = named.isEmpty ? "" : " for \(named.joined(separator: ", "))"
            return (.serviceUnavailable, "notReady", "no fresh token is cached, or the canary finds it refused\(which)", [])
        case .upstreamTimedOut(let seconds): return (.gatewayTimeout, "upstreamTimeout", "the upstream did not answer within \(seconds) s", [])
        case .upstreamClosed: return (.badGateway, "upstreamClosed", "the upstream closed the connection before answering", [])
        case .upstreamUnreachable(let url): return (.badGateway, "upstreamUnreachable", "cannot reach the upstream \(url)", [])
        case .overBudget:
            return (
                .serviceUnavailable, "overBudget",
                "this user's connections hold their share of the daemon's buffers (limits.bufferedBytes); retry shortly", again
            )
        case .egressRefused(let proxy, let target, let status):
            // The words of the token service client's failure (EGRESS-1), one sentence.
            let why = status == 407 ? " (proxy authentication required: see egress.proxyCredentialsFile)" : ""
            return (.badGateway, "egressRefused", "the forward proxy \(proxy) refused the CONNECT to \(target) with \(status)\(why)", [])
        }
    }
}

extension DaemonError {
    /// What NIO's request decoder (the socket API's codec) could not read. The proxy's own parser
    /// has its mapping beside it (`WAFTokenProxy`), in the same words: both end in the cases above.
    package init(_ parserError: HTTPParserError, sawVersionWithBareLineFeed: Bool) {
        self =
            switch parserError {
            case .headerOverflow: .headTooLarge
            case .invalidVersion where sawVersionWithBareLineFeed: .bareLineFeed
            case .invalidVersion: .unsupportedVersion
            default: .malformed("\(parserError)")
            }
    }
}
