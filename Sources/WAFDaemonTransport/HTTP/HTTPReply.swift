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

    package static func text(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") -> HTTPReply {
        HTTPReply(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }

    /// Every field of the answer's head: its own, then those every answer of the daemon carries.
    /// The one list both writers below take, so that no listener forgets one (`no-store`: a token
    /// or an error must not be cached on the way).
    package func fields(keepAlive: Bool, date: String = HTTPReply.date()) -> [(String, String)] {
        headers + [("Content-Length", "\(body.count)"), ("Date", date), ("Cache-Control", "no-store")] + (keepAlive ? [] : [("Connection", "close")])
    }

    /// The head for a writer above NIO's HTTP codec (the socket API's routes, its protocol errors).
    package func head(version: HTTPVersion = .http1_1, keepAlive: Bool) -> HTTPResponseHead {
        HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields(keepAlive: keepAlive)))
    }

    /// The whole response as bytes, for writers below an HTTP codec (the fast path, the proxy, 408s).
    package func encoded(keepAlive: Bool, date: String = HTTPReply.date(), headOnly: Bool = false, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: body.count + 256)
        buffer.writeString("HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n")
        for (name, value) in fields(keepAlive: keepAlive, date: date) { buffer.writeString("\(name): \(value)\r\n") }
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
