import NIOCore
import NIOHTTP1
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One answer of the socket API. Error bodies are JSON `{"error", "message"}` everywhere.
struct APIResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: [(String, String)]
    var body: [UInt8]

    static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func json(_ status: HTTPResponseStatus, _ value: some Encodable, headers: [(String, String)] = []) -> APIResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Our response types are plain values; encoding them cannot fail.
        let body = Array(try! encoder.encode(value)) + [UInt8(ascii: "\n")]
        return APIResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }

    static func error(_ status: HTTPResponseStatus, _ code: String, _ message: String, headers: [(String, String)] = []) -> APIResponse {
        json(status, ["error": code, "message": message], headers: headers)
    }

    static func text(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") -> APIResponse {
        APIResponse(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    /// The whole response as bytes, for writers below the HTTP codec (the fast path, 408s).
    func encoded(keepAlive: Bool, date: String, headOnly: Bool = false, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: body.count + 256)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
        for (name, value) in headers { buffer.writeString("\(name): \(value)\r\n") }
        buffer.writeString("Content-Length: \(body.count)\r\nDate: \(date)\r\nCache-Control: no-store\r\n")
        if !keepAlive { buffer.writeString("Connection: close\r\n") }
        buffer.writeString("\r\n")
        if !headOnly { buffer.writeBytes(body) }
        return buffer
    }
}

/// The token as `GET /v1/token` shows it (`getToken()`).
struct TokenBody: Encodable {
    let value: String
    let fetchedAt: String
    let ageSeconds: Int64
    let stale: Bool

    init(_ cached: (token: WAFToken, age: Duration, stale: Bool)) {
        value = cached.token.value
        fetchedAt = APIResponse.timeStyle.format(cached.token.fetchedAt)
        ageSeconds = cached.age.components.seconds
        stale = cached.stale
    }
}

/// Content negotiation between two media types (`/v1/token` defaults to JSON, `/v1/cookie` to text).
enum AcceptNegotiation {
    static let json = "application/json"
    static let plainText = "text/plain"

    /// Whether `accept` asks for `text/plain` over `application/json`.
    static func prefersPlainText(_ accept: String?) -> Bool {
        prefers(plainText, over: json, in: accept)
    }

    /// Whether `accept` asks for `application/json` over `text/plain`.
    static func prefersJSON(_ accept: String?) -> Bool {
        prefers(json, over: plainText, in: accept)
    }

    /// `wanted` wins when its quality is higher, or equal and matched more specifically (an explicit
    /// type beats `type/*`, which beats `*/*`). Without an Accept header, neither wins.
    static func prefers(_ wanted: String, over other: String, in accept: String?) -> Bool {
        guard let accept else { return false }
        let a = match(wanted, in: accept)
        let b = match(other, in: accept)
        guard a.q > 0 else { return false }
        return a.q > b.q || (a.q == b.q && a.specificity > b.specificity)
    }

    private static func match(_ type: String, in accept: String) -> (q: Double, specificity: Int) {
        let family = String(type.prefix { $0 != "/" }) + "/*"
        var best: (q: Double, specificity: Int) = (0, -1)
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";")
            let name = parts[0].filter { !$0.isWhitespace }.lowercased()
            let specificity = name == type ? 2 : name == family ? 1 : name == "*/*" ? 0 : -1
            guard specificity > best.specificity else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.filter { !$0.isWhitespace } }
                if pair.count == 2, pair[0] == "q", let value = Double(pair[1]) { q = value }
            }
            best = (q, specificity)
        }
        return best
    }
}
