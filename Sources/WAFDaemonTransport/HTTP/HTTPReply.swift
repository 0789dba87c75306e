import NIOCore
import NIOHTTP1

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// One answer of the daemon's, on any listener: a status, headers and a body. Error bodies are
/// JSON `{"error", "message"}` everywhere.
package struct HTTPReply: Sendable {
    package var status: HTTPResponseStatus
    package var headers: [(String, String)]
    package var body: [UInt8]

    package init(status: HTTPResponseStatus, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    package static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    package static func json(_ status: HTTPResponseStatus, _ value: some Encodable, headers: [(String, String)] = []) -> HTTPReply {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Our response types are plain values; encoding them cannot fail.
        let body = Array(try! encoder.encode(value)) + [UInt8(ascii: "\n")]
        return HTTPReply(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }

    package static func error(_ status: HTTPResponseStatus, _ code: String, _ message: String, headers: [(String, String)] = []) -> HTTPReply {
        json(status, ["error": code, "message": message], headers: headers)
    }

    package static func text(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") -> HTTPReply {
        HTTPReply(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    /// The whole response as bytes, for writers below an HTTP codec (the fast path, the proxy, 408s).
    package func encoded(keepAlive: Bool, date: String = HTTPReply.date(), headOnly: Bool = false, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: body.count + 256)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
        for (name, value) in headers { buffer.writeString("\(name): \(value)\r\n") }
        buffer.writeString("Content-Length: \(body.count)\r\nDate: \(date)\r\nCache-Control: no-store\r\n")
        if !keepAlive { buffer.writeString("Connection: close\r\n") }
        buffer.writeString("\r\n")
        if !headOnly { buffer.writeBytes(body) }
        return buffer
    }

    /// The `Date` header's value for `seconds` since the epoch (RFC 9110 IMF-fixdate, in the C
    /// locale the process never leaves).
    package static func date(seconds: Int = time(nil)) -> String {
        var seconds = time_t(seconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 40)
        let length = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
