/// How a message's body is delimited (RFC 9112 §6), decided strictly: where a proxy and the server
/// behind it could count a body differently, the message is refused. This is what keeps request
/// smuggling out: Content-Length with Transfer-Encoding, two lengths, a coding other than chunked,
/// a length that is not a plain number.
package enum HTTPFraming: Equatable {
    /// No body.
    case none
    case length(Int)
    case chunked
    /// To the end of the connection: a response without a length.
    case untilClose

    /// A request's body framing.
    package static func request(_ head: HTTPHead) throws(HTTPHeadParser.Failure) -> HTTPFraming {
        let lengths = head.count("content-length")
        let codings = head.count("transfer-encoding")
        if codings > 0 {
            guard lengths == 0 else { throw .malformed("a request has both Content-Length and Transfer-Encoding") }
            guard head.minorVersion == 1 else { throw .malformed("Transfer-Encoding in an HTTP/1.0 request") }
            guard codings == 1, head.elements("transfer-encoding") == ["chunked"] else {
                throw .malformed("a Transfer-Encoding other than chunked")
            }
            return .chunked
        }
        guard lengths <= 1 else { throw .malformed("a request has more than one Content-Length") }
        guard lengths == 1 else { return .none }
        let field = head.fields.first { head.equals($0.name, lowercase: "content-length") }!
        guard let length = head.bytes.withUnsafeReadableBytes({ decimal(UnsafeRawBufferPointer(rebasing: $0[field.value])) }) else {
            throw .malformed("a Content-Length that is not a number")
        }
        return length == 0 ? .none : .length(length)
    }

    /// A response's body framing, for a request that was (`toHead`) or was not a HEAD.
    package static func response(_ head: HTTPHead, toHead: Bool) throws(HTTPHeadParser.Failure) -> HTTPFraming {
        let status = head.status
        if toHead || status < 200 || status == 204 || status == 304 { return .none }
        if head.contains("transfer-encoding") {
            // A coding the client would have to undo without being told of it: refused.
            guard head.elements("transfer-encoding") == ["chunked"] else { throw .malformed("the upstream's Transfer-Encoding is not chunked alone") }
            return .chunked
        }
        var length: Int?
        var agree = true
        head.forEachElement("content-length") { element in
            let value = head.bytes.withUnsafeReadableBytes { decimal(UnsafeRawBufferPointer(rebasing: $0[element])) }
            agree = value != nil && (length == nil || length == value)
            length = value
            return agree
        }
        guard agree else { throw .malformed("the upstream's Content-Length is not one number") }
        return length.map { .length($0) } ?? .untilClose
    }

    /// A plain decimal number (no sign, no spaces), small enough to count bytes with.
    package static func decimal(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

}
