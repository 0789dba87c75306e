/// How a message's body is delimited (RFC 9112 §6), decided strictly: where a proxy and the server
/// behind it could count a body differently, the message is refused. This is what keeps request
/// smuggling out: Content-Length with Transfer-Encoding, two lengths, a coding other than chunked,
/// a length that is not a plain number.
enum HTTPFraming: Equatable {
    /// No body.
    case none
    case length(Int)
    case chunked
    /// To the end of the connection: a response without a length.
    case untilClose

    /// A request's body framing.
    static func request(_ head: HTTPHead) throws(HTTPHeadParser.Failure) -> HTTPFraming {
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
    static func response(_ head: HTTPHead, toHead: Bool) throws(HTTPHeadParser.Failure) -> HTTPFraming {
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
    static func decimal(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

}

/// Follows a chunked body (RFC 9112 §7.1) byte by byte across reads, strictly (CRLF line ends, hex
/// sizes, no control bytes): it finds where the body ends and, on request, where its data lies.
struct ChunkedScanner {
    private enum State {
        case size(Int, digits: Int)
        case extensions(Int)
        case sizeLF(Int)
        case data(Int)
        case dataCR, dataLF
        case trailerLineStart, trailerLine, trailerLF, lastLF
        case done
    }

    private var state = State.size(0, digits: 0)
    private var trailerBytes = 0
    static let maximumTrailerBytes = 16 * 1024

    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Reads `bytes`, calling `data` with each range of chunk data in them; returns how many bytes
    /// belong to the body (fewer than all when it ends within them).
    mutating func scan(_ bytes: UnsafeRawBufferPointer, data: (Range<Int>) -> Void = { _ in }) throws(HTTPHeadParser.Failure) -> Int {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .size(let size, let digits):
                if let value = Self.hex(byte) {
                    guard digits < 15 else { throw .malformed("a chunk size is too large") }
                    state = .size(size << 4 | value, digits: digits + 1)
                } else if digits > 0, byte == 0x0D {
                    state = .sizeLF(size)
                } else if digits > 0, byte == UInt8(ascii: ";") || byte == 0x20 || byte == 0x09 {
                    state = .extensions(size)
                } else {
                    throw .malformed("a chunk does not start with its size in hex")
                }
            case .extensions(let size):
                if byte == 0x0D {
                    state = .sizeLF(size)
                } else if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                    throw .malformed("a chunk extension holds a control byte")
                }
            case .sizeLF(let size):
                guard byte == 0x0A else { throw .malformed("a chunk size line does not end in CRLF") }
                state = size == 0 ? .trailerLineStart : .data(size)
            case .data(let left):
                let taken = min(left, bytes.count - index)
                data(index..<(index + taken))
                index += taken
                state = left == taken ? .dataCR : .data(left - taken)
                continue
            case .dataCR:
                guard byte == 0x0D else { throw .malformed("a chunk's data is longer than its size") }
                state = .dataLF
            case .dataLF:
                guard byte == 0x0A else { throw .malformed("a chunk's data does not end in CRLF") }
                state = .size(0, digits: 0)
            case .trailerLineStart:
                if byte == 0x0D {
                    state = .lastLF
                } else if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                    throw .malformed("a trailer line holds a control byte")
                } else {
                    state = .trailerLine
                }
                try countTrailer()
            case .trailerLine:
                if byte == 0x0D {
                    state = .trailerLF
                } else if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                    throw .malformed("a trailer line holds a control byte")
                }
                try countTrailer()
            case .trailerLF:
                guard byte == 0x0A else { throw .malformed("a trailer line does not end in CRLF") }
                state = .trailerLineStart
            case .lastLF:
                guard byte == 0x0A else { throw .malformed("a chunked body does not end in CRLF") }
                state = .done
                return index + 1
            case .done:
                return index
            }
            index += 1
        }
        return index
    }

    private mutating func countTrailer() throws(HTTPHeadParser.Failure) {
        trailerBytes += 1
        if trailerBytes > Self.maximumTrailerBytes { throw .tooLarge }
    }

    private static func hex(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
