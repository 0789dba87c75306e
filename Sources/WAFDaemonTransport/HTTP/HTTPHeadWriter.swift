import NIOCore
import NIOHTTP1

/// Every response head the daemon writes, on every listener, is made here: the status line and the
/// fields, as bytes for the writers below an HTTP codec (the fast path, the proxy, the guard's
/// refusals) and as NIO's head for those above one (the socket API's routes, its event stream).
/// One writer, so that no listener spells a head its own way (`HTTPReply` lists the fields every
/// answer of the daemon's carries; the proxy relays an upstream's fields as they came).
package enum HTTPHeadWriter {
    /// The interim answer to `Expect: 100-continue`.
    package static let `continue` = ByteBuffer(staticString: "HTTP/1.1 100 Continue\r\n\r\n")

    /// `HTTP/1.1 CODE REASON`, each of `fields`, and the blank line.
    package static func write(status: HTTPResponseStatus, fields: [(String, String)], into buffer: inout ByteBuffer) {
        writeStatusLine(code: String(status.code).utf8, reason: status.reasonPhrase.utf8, into: &buffer)
        for (name, value) in fields { writeField(name, value, into: &buffer) }
        buffer.writeStaticString("\r\n")
    }

    /// `HTTP/1.1 CODE REASON` from the bytes of a code and a reason (an upstream's, relayed).
    package static func writeStatusLine(code: some Collection<UInt8>, reason: some Collection<UInt8>, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeBytes(code)
        buffer.writeStaticString(" ")
        buffer.writeBytes(reason)
        buffer.writeStaticString("\r\n")
    }

    package static func writeField(_ name: String, _ value: String, into buffer: inout ByteBuffer) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(value)
        buffer.writeStaticString("\r\n")
    }

    /// The same head for NIO's encoder, which writes it.
    package static func head(status: HTTPResponseStatus, fields: [(String, String)], version: HTTPVersion) -> HTTPResponseHead {
        HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields))
    }
}
