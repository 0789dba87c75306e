import NIOCore
import NIOHTTP1
import WAFJSON

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A token as the daemon hands it out.
public struct WAFDaemonToken: Sendable, Hashable, Decodable, CustomStringConvertible {
    public let value: String
    public let fetchedAt: String
    public let ageSeconds: Int?
    public let stale: Bool?
    public let fingerprint: String?

    /// The token's value, as the SDK's `WAFToken.getValue()`.
    public func getValue() -> String { value }

    /// Shows the fingerprint only: a token is a bearer secret.
    public var description: String { "WAFDaemonToken(\(fingerprint ?? "fetched \(fetchedAt)"))" }
}

/// Why the daemon gave no token.
public enum WAFTokenClientError: Error, Sendable, CustomStringConvertible {
    /// The socket cannot be reached: no daemon, or no permission on the socket file.
    case unreachable(String)
    /// The daemon refused this user (403).
    case forbidden(String)
    /// No token: none cached yet, or the provider's retries failed (`error` is the SdkError name).
    case noToken(error: String, message: String)
    /// No token within the wait.
    case timedOut(String)
    /// An answer that makes no sense.
    case badResponse(String)
    /// The provider asked for is none of the daemon's (or none was named and there are several).
    case noSuchProvider(String)

    public var description: String {
        switch self {
        case .unreachable(let detail): "cannot reach waf-tokend: \(detail)"
        case .forbidden(let detail): "waf-tokend refused this user: \(detail)"
        case .noToken(let error, let message): "no token (\(error)): \(message)"
        case .timedOut(let detail): "no token in time: \(detail)"
        case .badResponse(let detail): "unexpected answer from waf-tokend: \(detail)"
        case .noSuchProvider(let detail): "no such provider: \(detail)"
        }
    }
}

/// One Server-Sent Event from `GET /v1/events`.
public struct WAFDaemonEvent: Sendable, Hashable {
    public let name: String
    public let data: String
}

/// Which of the daemon's providers a client means (the daemon's `?provider=` and `?domain=`).
public enum WAFProviderSelector: Sendable, Hashable {
    /// The provider of this name.
    case name(String)
    /// The provider whose `domainName` is this host, or its closest parent.
    case domain(String)

    var query: String {
        switch self {
        case .name(let name): "provider=" + WAFTokenDaemonClient.queryEncoded(name)
        case .domain(let host): "domain=" + WAFTokenDaemonClient.queryEncoded(host)
        }
    }
}

/// A client of `waf-tokend`'s socket API, for Swift services beside the daemon. It has the SDK's
/// shape — `getToken()`, `onTokenReady` — and a stream of token updates; of one provider, the
/// daemon's `default` (or only) one unless `provider` names another.
public final class WAFTokenDaemonClient: Sendable {
    public static let defaultSocketPath = "/run/waf-tokend/token.sock"

    public let socketPath: String
    public let provider: WAFProviderSelector?
    private let connection: DaemonConnection

    /// `socketPath` defaults to `$WAF_TOKEND_SOCKET`, then the daemon's default path.
    public init(socketPath: String? = nil, provider: WAFProviderSelector? = nil) {
        // One variable read, not the whole environment copied into a dictionary: `waf-tokenctl
        // token` without `--socket` pays this on every call.
        self.socketPath = socketPath ?? getenv("WAF_TOKEND_SOCKET").map { String(cString: $0) } ?? Self.defaultSocketPath
        self.provider = provider
        connection = DaemonConnection(socketPath: self.socketPath)
    }

    /// `path` with this client's provider selector added to its query.
    func selected(_ path: String) -> String {
        guard let provider else { return path }
        return path + (path.contains("?") ? "&" : "?") + provider.query
    }

    /// Nothing to release: every call has a connection of its own, closed when it is answered.
    public func shutdown() async {}

    // MARK: The SDK's calls

    /// The cached token (`getToken()`), nil when the daemon has none yet.
    public func getToken() async throws(WAFTokenClientError) -> WAFDaemonToken? {
        do {
            return try await token(at: selected("/v1/token"), method: .GET, timeout: .seconds(60))
        } catch .noToken(error: "noToken", _) {
            return nil
        }
    }

    /// An active token (`onTokenReady`): at once if the cached one is fresh, else after a refresh.
    public func tokenReady(wait: Duration = .seconds(30)) async throws(WAFTokenClientError) -> WAFDaemonToken {
        try await token(at: selected("/v1/token?wait=\(wait.seconds)"), method: .GET, timeout: wait + .seconds(5))
    }

    /// `onTokenReady` with a callback, as the SDK has it; the callback gets exactly one of the two.
    public func onTokenReady(wait: Duration = .seconds(30), _ callback: @escaping @Sendable (WAFDaemonToken?, WAFTokenClientError?) -> Void) {
        Task {
            do throws(WAFTokenClientError) {
                callback(try await tokenReady(wait: wait), nil)
            } catch {
                callback(nil, error)
            }
        }
    }

    /// `getToken()` (nil: none cached), or `tokenReady(wait:)` with a wait, with the system's calls
    /// on the calling thread instead of an event loop: for a command that asks once and exits.
    public func tokenWithoutEventLoop(wait: Duration?) throws(WAFTokenClientError) -> WAFDaemonToken? {
        guard let body = try tokenAnswerWithoutEventLoop(wait: wait, accept: "application/json") else { return nil }
        do {
            return try JSONDecoder().decode(WAFDaemonToken.self, from: Data(body))
        } catch {
            throw .badResponse("a token answer that is not a token: \(error)")
        }
    }

    /// `tokenWithoutEventLoop`'s value alone, which the daemon sends as text (`Accept:
    /// text/plain`): `waf-tokenctl token` prints nothing else, and decoding the JSON document took a
    /// fifth of that command's CPU (docs/performance.md, "Start-up in detail"). An answer that is not
    /// one token (empty, or with bytes no token has) is a bad response, not printed.
    public func tokenValueWithoutEventLoop(wait: Duration?) throws(WAFTokenClientError) -> String? {
        guard let body = try tokenAnswerWithoutEventLoop(wait: wait, accept: "text/plain") else { return nil }
        // A token is printable ASCII without spaces (TOKEN-SERVICE-PROTOCOL.md: a UUID and base64, joined by `:`).
        guard !body.isEmpty, body.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .badResponse("a token answer that is not a token: \(body.count) bytes that are not one token")
        }
        return String(decoding: body, as: UTF8.self)
    }

    private func tokenAnswerWithoutEventLoop(wait: Duration?, accept: String) throws(WAFTokenClientError) -> [UInt8]? {
        let path = selected(wait.map { "/v1/token?wait=\($0.seconds)" } ?? "/v1/token")
        let (status, body) = try BlockingExchange.get(
            path, socketPath: socketPath, accept: accept, timeout: wait.map { $0 + .seconds(5) } ?? .seconds(60))
        do {
            try Self.check(status, body)
        } catch .noToken(error: "noToken", _) where wait == nil {
            return nil
        }
        return body
    }

    /// "This token was refused": a new one now (the daemon's `POST /v1/refresh`).
    public func refresh(wait: Duration = .seconds(30)) async throws(WAFTokenClientError) -> WAFDaemonToken {
        try await token(at: selected("/v1/refresh?wait=\(wait.seconds)"), method: .POST, timeout: wait + .seconds(5))
    }

    /// The `Cookie` header value for a request to `path`, nil when no cookie applies.
    public func cookie(forPath path: String) async throws(WAFTokenClientError) -> String? {
        let (status, body) = try await request(selected("/v1/cookie?path=\(Self.queryEncoded(path))"), accept: "text/plain")
        if status == 404 { return nil }
        try Self.check(status, body)
        return String(decoding: body, as: UTF8.self)
    }

    /// The daemon's status document: this client's provider, or (with none named) the implicit
    /// one and every provider under `providers`.
    public func status() async throws(WAFTokenClientError) -> JSONValue {
        try await document(selected("/v1/status"), method: .GET, body: nil)
    }

    /// The providers this user may use: name, identity, token freshness and refresh state.
    public func providers() async throws(WAFTokenClientError) -> JSONValue {
        try await document("/v1/providers", method: .GET, body: nil)
    }

    /// Moves the app to `state` (`foreground`, `background`, `closed`); returns the new lifecycle.
    public func setLifecycle(_ state: String) async throws(WAFTokenClientError) -> JSONValue {
        try await document("/v1/lifecycle", method: .PUT, body: Array(state.utf8))
    }

    /// Whether this client's provider has a fresh token (`/readyz`; every provider's with none named).
    public func isReady() async throws(WAFTokenClientError) -> Bool {
        let (status, body) = try await request(selected("/readyz"))
        if status == 503 { return false }
        try Self.check(status, body)
        return true
    }

    /// Whether the daemon's core answers (`/healthz`).
    public func isHealthy() async throws(WAFTokenClientError) -> Bool {
        let (status, _) = try await request("/healthz")
        if status == 403 { throw .forbidden("403") }
        return status == 200
    }

    // MARK: Streams

    /// Every event the daemon announces, as it comes.
    public func events() -> AsyncThrowingStream<WAFDaemonEvent, any Error> {
        let connection = connection
        let path = selected("/v1/events")
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await connection.stream(path, accept: "text/event-stream") { status, body in
                        try Self.check(status, body)
                        throw WAFTokenClientError.badResponse("HTTP \(status)")
                    } onChunk: { parser, chunk in
                        for event in parser.feed(chunk) { continuation.yield(event) }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: Self.transportError(error))
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The token, and every new one after it.
    public func tokenUpdates() -> AsyncThrowingStream<WAFDaemonToken, any Error> {
        let events = events()
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await event in events where event.name == "token" {
                        continuation.yield(try JSONDecoder().decode(WAFDaemonToken.self, from: Data(event.data.utf8)))
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: Plumbing

    private func token(at path: String, method: HTTPMethod, timeout: Duration) async throws(WAFTokenClientError) -> WAFDaemonToken {
        let (status, body) = try await request(path, method: method, accept: "application/json", timeout: timeout)
        try Self.check(status, body)
        do {
            return try JSONDecoder().decode(WAFDaemonToken.self, from: Data(body))
        } catch {
            throw .badResponse("a token answer that is not a token: \(error)")
        }
    }

    private func document(_ path: String, method: HTTPMethod, body: [UInt8]?) async throws(WAFTokenClientError) -> JSONValue {
        let (status, answer) = try await request(path, method: method, body: body)
        try Self.check(status, answer)
        guard let document = JSONValue.parse(answer) else { throw .badResponse("not JSON") }
        return document
    }

    /// Throws the error a non-2xx answer stands for.
    static func check(_ status: UInt, _ body: [UInt8]) throws(WAFTokenClientError) {
        guard !(200..<300).contains(status) else { return }
        let document = JSONValue.parse(body)
        let code = document?["error"]?.string ?? "HTTP \(status)"
        let message = document?["message"]?.string ?? String(decoding: body.prefix(200), as: UTF8.self)
        switch status {
        case 403: throw .forbidden(message)
        case 400 where code == "providerRequired", 404 where code == "unknownProvider" || code == "unknownDomain": throw .noSuchProvider(message)
        case 503: throw .noToken(error: code, message: message)
        case 504: throw .timedOut(message)
        default: throw .badResponse("\(code): \(message)")
        }
    }

    func request(
        _ path: String, method: HTTPMethod = .GET, accept: String? = nil, body: [UInt8]? = nil, timeout: Duration = .seconds(60)
    ) async throws(WAFTokenClientError) -> (UInt, [UInt8]) {
        do {
            return try await connection.exchange(path, method: method, accept: accept, body: body, timeout: timeout)
        } catch {
            throw Self.transportError(error)
        }
    }

    /// Percent-encodes all but unreserved characters and `/`, for a query value.
    static func queryEncoded(_ value: String) -> String {
        var encoded = ""
        for byte in value.utf8 {
            let character = Character(Unicode.Scalar(byte))
            if byte < 0x80, character.isLetter || character.isNumber || "-._~/".contains(character) {
                encoded.append(character)
            } else {
                encoded += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return encoded
    }

    public static func transportError(_ error: any Error) -> WAFTokenClientError {
        if let error = error as? WAFTokenClientError { return error }
        return .unreachable("\(error)")
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
