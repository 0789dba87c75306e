/// Recognises the hot request, a plain `GET /v1/token` over HTTP/1.1, from its raw head, with
/// at most one selector (`?provider=NAME` or `?domain=HOST`, MULTI-2).
///
/// It is deliberately narrow: anything that touches message framing or the connection
/// (Content-Length, Transfer-Encoding, Connection, Expect, Upgrade) or a malformed line makes it
/// step aside, and the full HTTP codec takes the request instead. A missing Host is accepted, as by
/// the codec path: on a Unix socket there is no authority, and some clients (AsyncHTTPClient over
/// http+unix) send none.
enum PlainTokenRequest {
    static let requestLine = Array("GET /v1/token HTTP/1.1\r\n".utf8)
    private static let path = Array("GET /v1/token".utf8)
    private static let version = Array(" HTTP/1.1\r\n".utf8)
    private static let providerQuery = Array("?provider=".utf8)
    private static let domainQuery = Array("?domain=".utf8)

    /// What the fast path answers a head with: the text or JSON form, for the selector's provider
    /// (the query's bytes without the `?`, nil for none).
    struct Decision {
        let plainText: Bool
        let selector: Range<Int>?
    }

    /// For a complete head: nil if the fast path must not answer it.
    static func decide(_ head: UnsafeRawBufferPointer) -> Decision? {
        guard let (selector, headers) = target(head, path: path) else { return nil }
        return prefersPlainText(head, headersAt: headers).map { Decision(plainText: $0, selector: selector) }
    }

    /// For a head whose request line is `path` (`GET /v1/...`), at most one selector and
    /// HTTP/1.1: the selector's bytes (without the `?`) and where the header lines begin.
    static func target(_ head: UnsafeRawBufferPointer, path: [UInt8]) -> (selector: Range<Int>?, headers: Int)? {
        guard head.count > path.count + version.count, head.prefix(path.count).elementsEqual(path) else { return nil }
        var index = path.count
        var selector: Range<Int>?
        if head[index] == UInt8(ascii: "?") {
            let isProvider = head[index...].starts(with: providerQuery)
            guard isProvider || head[index...].starts(with: domainQuery) else { return nil }
            let valueStart = index + (isProvider ? providerQuery.count : domainQuery.count)
            var end = valueStart
            while end < head.count, isSelectorByte(head[end], provider: isProvider) { end += 1 }
            guard end > valueStart, end - valueStart <= (isProvider ? 32 : 253) else { return nil }
            selector = (index + 1)..<end
            index = end
        }
        guard head[index...].starts(with: version) else { return nil }
        return (selector, index + version.count)
    }

    private static func isSelectorByte(_ byte: UInt8, provider: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): true
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "."): !provider
        default: false
        }
    }
    private static let disqualifying: [[UInt8]] = ["content-length", "transfer-encoding", "connection", "expect", "upgrade"].map { Array($0.utf8) }
    private static let accept = Array("accept".utf8)

    /// The length of the head including its blank line, or nil if it is not complete within its
    /// first `limit` bytes.
    static func headLength(in bytes: UnsafeRawBufferPointer, limit: Int = .max) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 0
        let end = min(bytes.count, limit)
        while index + 3 < end {
            if bytes[index + 3] != 0x0A {
                index += bytes[index + 3] == 0x0D ? 1 : 4
                continue
            }
            if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D { return index + 4 }
            index += 1
        }
        return nil
    }

    /// Whether an LF in `bytes` is not preceded by a CR: no head the fast path answers, ever.
    static func hasBareLineFeed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while let newline = bytes[index...].firstIndex(of: 0x0A) {
            if newline == 0 || bytes[newline - 1] != 0x0D { return true }
            index = newline + 1
        }
        return false
    }

    /// For a complete head: nil if the fast path must not answer it, else whether it asks for
    /// `text/plain` (true) or JSON (false).
    static func prefersPlainText(_ head: UnsafeRawBufferPointer) -> Bool? {
        guard head.count >= requestLine.count, head.prefix(requestLine.count).elementsEqual(requestLine) else { return nil }
        return prefersPlainText(head, headersAt: requestLine.count)
    }

    /// The header lines from `headersAt` on: nil if any disqualifies the head.
    private static func prefersPlainText(_ head: UnsafeRawBufferPointer, headersAt start: Int) -> Bool? {
        var acceptValue: Range<Int>?
        var twice = false
        let clean = scanHeaders(head, from: start) { name, value in
            guard matches(head, name, accept) else { return }
            twice = twice || acceptValue != nil
            acceptValue = value
        }
        guard clean, !twice else { return nil }
        return AcceptNegotiation.prefersPlainText(acceptValue.map { String(decoding: UnsafeRawBufferPointer(rebasing: head[$0]), as: UTF8.self) })
    }

    /// Calls `visit` with each header line's name and value (the value's range includes any
    /// leading and trailing blanks); false, without visiting the rest, at a line the fast path must
    /// leave to the codec: a malformed name or value, or a header about framing or the connection.
    static func scanHeaders(_ head: UnsafeRawBufferPointer, from start: Int, _ visit: (Range<Int>, Range<Int>) -> Void) -> Bool {
        var lineStart = start
        let end = head.count - 2  // the final CRLF
        while lineStart < end {
            var lineEnd = lineStart
            while lineEnd + 1 < head.count, !(head[lineEnd] == 0x0D && head[lineEnd + 1] == 0x0A) { lineEnd += 1 }
            // Header names are tokens: a space, tab, control byte (or obs-fold) is for the codec to refuse.
            var colon = lineStart
            while colon < lineEnd, head[colon] != UInt8(ascii: ":") {
                if head[colon] <= 0x20 || head[colon] >= 0x7F { return false }
                colon += 1
            }
            guard colon < lineEnd, colon > lineStart else { return false }
            for index in (colon + 1)..<lineEnd where (head[index] < 0x20 && head[index] != 0x09) || head[index] == 0x7F { return false }
            let name = lineStart..<colon
            if disqualifying.contains(where: { matches(head, name, $0) }) { return false }
            visit(name, (colon + 1)..<lineEnd)
            lineStart = lineEnd + 2
        }
        return true
    }

    /// A case-insensitive comparison of a header name with a lower-case one, without copying.
    @inline(__always)
    static func matches(_ head: UnsafeRawBufferPointer, _ name: Range<Int>, _ lowercase: [UInt8]) -> Bool {
        guard name.count == lowercase.count else { return false }
        var index = name.lowerBound
        for byte in lowercase {
            // ASCII lower case by setting bit 5: letters fold, and '-' and digits already have it.
            if head[index] | 0x20 != byte { return false }
            index += 1
        }
        return true
    }
}
