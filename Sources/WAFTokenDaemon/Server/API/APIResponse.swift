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
