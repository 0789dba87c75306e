/// Recognises the hot request, a plain `GET /v1/token` over HTTP/1.1, from its raw head.
///
/// It is deliberately narrow: anything that touches message framing or the connection
/// (Content-Length, Transfer-Encoding, Connection, Expect, Upgrade) or a malformed line makes it
/// step aside, and the full HTTP codec takes the request instead. A missing Host is accepted, as by
/// the codec path: on a Unix socket there is no authority, and some clients (AsyncHTTPClient over
/// http+unix) send none.
enum HotRequest {
    static let requestLine = Array("GET /v1/token HTTP/1.1\r\n".utf8)
    static let headTerminator = Array("\r\n\r\n".utf8)
    private static let disqualifying: [[UInt8]] = ["content-length", "transfer-encoding", "connection", "expect", "upgrade"].map { Array($0.utf8) }
    private static let accept = Array("accept".utf8)

    /// The length of the head including its blank line, or nil if it is not complete yet.
    static func headLength(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 0
        while index + 3 < bytes.count {
            if bytes[index + 3] != 0x0A {
                index += bytes[index + 3] == 0x0D ? 1 : 4
                continue
            }
            if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D { return index + 4 }
            index += 1
        }
        return nil
    }

    /// For a complete head: nil if the fast path must not answer it, else whether it asks for
    /// `text/plain` (true) or JSON (false).
    static func prefersPlainText(_ head: UnsafeRawBufferPointer) -> Bool? {
        guard head.count >= requestLine.count, head.prefix(requestLine.count).elementsEqual(requestLine) else { return nil }
        var acceptValue: String?
        var lineStart = requestLine.count
        let end = head.count - 2  // the final CRLF
        while lineStart < end {
            var lineEnd = lineStart
            while lineEnd + 1 < head.count, !(head[lineEnd] == 0x0D && head[lineEnd + 1] == 0x0A) { lineEnd += 1 }
            let line = UnsafeRawBufferPointer(rebasing: head[lineStart..<lineEnd])
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return nil }
            // Header names are tokens; a space, tab or control byte (or obs-fold) is for the codec to refuse.
            for byte in line[0..<colon] where byte <= 0x20 || byte >= 0x7F { return nil }
            for byte in line[(colon + 1)...] where (byte < 0x20 && byte != 0x09) || byte == 0x7F { return nil }
            let name = line[0..<colon].map { $0 | 0x20 }  // ASCII lower case; names hold no letters above 'Z' that this breaks
            if disqualifying.contains(where: { $0.elementsEqual(name) }) { return nil }
            if name.elementsEqual(accept) {
                if acceptValue != nil { return nil }
                acceptValue = String(decoding: line[(colon + 1)...], as: UTF8.self)
            }
            lineStart = lineEnd + 2
        }
        return AcceptNegotiation.prefersPlainText(acceptValue)
    }
}
