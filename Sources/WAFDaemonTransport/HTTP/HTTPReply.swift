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
        HTTPHeadWriter.head(status: status, fields: fields(keepAlive: keepAlive), version: version)
    }

    /// The whole response as bytes, for writers below an HTTP codec (the fast path, the proxy, 408s).
    package func encoded(keepAlive: Bool, date: String = HTTPReply.date(), headOnly: Bool = false, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: body.count + 256)
        HTTPHeadWriter.write(status: status, fields: fields(keepAlive: keepAlive, date: date), into: &buffer)
        if !headOnly { buffer.writeBytes(body) }
        return buffer
    }

    /// The head of an event stream (`text/event-stream`, no length: it lasts as long as the stream).
    package static func eventStreamHead(version: HTTPVersion) -> HTTPResponseHead {
        HTTPHeadWriter.head(
            status: .ok, fields: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("Date", HTTPReply.date())], version: version)
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
