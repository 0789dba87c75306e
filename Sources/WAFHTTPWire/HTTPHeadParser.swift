import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Finds and checks HTTP/1.x heads in raw bytes, strictly: what a lenient parser and the server
/// behind it could read differently (a bare LF, obs-fold, a space before a colon, a control
/// byte) is refused, never repaired. The framing rules on top are `HTTPFraming`'s.
package enum HTTPHeadParser {
    package enum Failure: Error, Equatable {
        /// 400, with why.
        case malformed(String)
        /// 431: the head is larger than its limit, or has too many fields.
        case tooLarge
        /// 505: a version other than HTTP/1.0 and HTTP/1.1.
        case unsupportedVersion
    }

    package static let maximumFields = 128

    /// Where the head at the start of `bytes` ends (just after its blank line); nil while it is
    /// incomplete. Throws as soon as a line ends in a bare LF or the head passes `limit` bytes.
    /// `from`: how far an earlier call looked (a head arriving in pieces is not scanned again).
    package static func headEnd(_ bytes: UnsafeRawBufferPointer, limit: Int, from: Int = 0) throws(Failure) -> Int? {
        var index = max(0, min(from, bytes.count) - 3)
        while let newline = newline(bytes, from: index) {
            guard newline > 0, bytes[newline - 1] == 0x0D else {
                throw .malformed("a line ends in a bare LF; HTTP lines end in CRLF")
            }
            if newline >= 3, bytes[newline - 2] == 0x0A, bytes[newline - 3] == 0x0D {
                guard newline + 1 <= limit else { throw .tooLarge }
                return newline + 1
            }
            index = newline + 1
        }
        if bytes.count > limit { throw .tooLarge }
        return nil
    }

    /// How many bytes of empty lines (CRLF) come first: a client may send one after a body.
    package static func leadingEmptyLines(_ bytes: UnsafeRawBufferPointer) -> Int {
        var index = 0
        while index + 1 < bytes.count, bytes[index] == 0x0D, bytes[index + 1] == 0x0A { index += 2 }
        return index
    }

    /// A request head: `method SP target SP HTTP/1.x`, then its fields.
    package static func request(_ head: ByteBuffer) throws(Failure) -> HTTPHead {
        try head.withUnsafeReadableBytes { raw throws(Failure) in
            let lineEnd = try endOfLine(raw, from: 0)
            guard let space = raw[0..<lineEnd].firstIndex(of: 0x20), space > 0, raw[0..<space].allSatisfy(isToken) else {
                throw .malformed("the request line does not start with a method")
            }
            guard let secondSpace = raw[(space + 1)..<lineEnd].firstIndex(of: 0x20), secondSpace > space + 1,
                raw[(space + 1)..<secondSpace].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { throw .malformed("the request target is missing or holds a space or control byte") }
            let minor = try version(raw, (secondSpace + 1)..<lineEnd)
            let (fields, names) = try fields(raw, from: lineEnd + 2)
            return HTTPHead(
                bytes: head, first: 0..<space, second: (space + 1)..<secondSpace, third: (secondSpace + 1)..<lineEnd, minorVersion: minor,
                fields: fields, names: names)
        }
    }

    /// A response head: `HTTP/1.x SP status [SP reason]`, then its fields.
    package static func response(_ head: ByteBuffer) throws(Failure) -> HTTPHead {
        try head.withUnsafeReadableBytes { raw throws(Failure) in
            let lineEnd = try endOfLine(raw, from: 0)
            guard lineEnd >= 12, raw[8] == 0x20, raw[9..<12].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), lineEnd == 12 || raw[12] == 0x20,
                raw[min(13, lineEnd)..<lineEnd].allSatisfy(isFieldValue)
            else { throw .malformed("the status line is not HTTP/1.x, a status code and a reason") }
            let minor = try version(raw, 0..<8)
            let (fields, names) = try fields(raw, from: lineEnd + 2)
            return HTTPHead(
                bytes: head, first: 0..<8, second: 9..<12, third: min(13, lineEnd)..<lineEnd, minorVersion: minor, fields: fields,
                names: names)
        }
    }

    // MARK: The parts

    private static func endOfLine(_ raw: UnsafeRawBufferPointer, from start: Int) throws(Failure) -> Int {
        // headEnd found every LF preceded by a CR, and the head ends in CRLF CRLF.
        guard let newline = newline(raw, from: start) else { throw .malformed("a line has no end") }
        return newline - 1
    }

    private static func version(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>) throws(Failure) -> Int {
        let start = range.lowerBound
        // Byte by byte: a generic `starts(with:)` was 1 % of the proxy's time.
        guard range.count == 8, raw[start] == UInt8(ascii: "H"), raw[start + 1] == UInt8(ascii: "T"), raw[start + 2] == UInt8(ascii: "T"),
            raw[start + 3] == UInt8(ascii: "P"), raw[start + 4] == UInt8(ascii: "/"), raw[start + 6] == UInt8(ascii: "."),
            let major = digit(raw[start + 5]), let minor = digit(raw[start + 7])
        else { throw .malformed("the version is not HTTP/x.y") }
        guard major == 1, minor <= 1 else { throw .unsupportedVersion }
        return minor
    }

    private static func digit(_ byte: UInt8) -> Int? {
        byte >= 0x30 && byte <= 0x39 ? Int(byte - 0x30) : nil
    }

    /// The fields, and the bits of their names (`HTTPHead.names`).
    private static func fields(_ raw: UnsafeRawBufferPointer, from start: Int) throws(Failure) -> ([HTTPHead.Field], UInt64) {
        var fields: [HTTPHead.Field] = []
        var names: UInt64 = 0
        // Most heads have fewer: one allocation rather than a growth at 1, 2, 4 and 8.
        fields.reserveCapacity(16)
        var lineStart = start
        let end = raw.count - 2  // the blank line's CRLF
        while lineStart < end {
            let lineEnd = try endOfLine(raw, from: lineStart)
            if raw[lineStart] == 0x20 || raw[lineStart] == 0x09 { throw .malformed("a header line is folded (obs-fold)") }
            // The name's bytes up to the first that is not a tchar: a colon, or where it goes wrong.
            // The line's CR is not one, so the loop stops at its end without a bound to check.
            var colon = lineStart
            while isToken(raw[colon]) { colon += 1 }
            guard colon < lineEnd, colon > lineStart else { throw .malformed("a header line has no name or no colon") }
            guard raw[colon] == UInt8(ascii: ":") else { throw .malformed("a header name holds a space, control or separator byte") }
            var valueStart = colon + 1
            while valueStart < lineEnd, raw[valueStart] == 0x20 || raw[valueStart] == 0x09 { valueStart += 1 }
            var valueEnd = lineEnd
            while valueEnd > valueStart, raw[valueEnd - 1] == 0x20 || raw[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            guard isFieldValue(raw, valueStart..<valueEnd) else { throw .malformed("a header value holds a control byte") }
            guard fields.count < maximumFields else { throw .tooLarge }
            fields.append(HTTPHead.Field(name: lineStart..<colon, value: valueStart..<valueEnd, line: lineStart..<lineEnd))
            names |= HTTPHead.nameBit(of: lineStart..<colon, raw)
            lineStart = lineEnd + 2
        }
        return (fields, names)
    }

    /// RFC 9110 §5.6.2: `tchar`. A bit per ASCII byte in two words, not a table: a global's
    /// lazy initialisation is checked on every use, and this runs for every byte of every name.
    @inline(__always)
    package static func isToken(_ byte: UInt8) -> Bool {
        // Without branches: the word for the byte's half of ASCII, shifted by its low six bits.
        let word: UInt64 = byte < 64 ? 0x03ff_6cfa_0000_0000 : 0x57ff_ffff_c7ff_fffe
        return byte < 128 && (word &>> UInt64(byte & 63)) & 1 == 1
    }

    /// RFC 9110 §5.5: a field value's bytes are HTAB, SP, visible ASCII and obs-text.
    @inline(__always)
    private static func isFieldValue(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// Whether every byte of `raw[range]` may be in a field value: eight at a time while none is
    /// below 0x20 or DEL, found by word arithmetic (Bit Twiddling Hacks' "hasless" and "haszero":
    /// a word with such a byte is always flagged, and a flagged word is read byte by byte, so a
    /// tab, which may be there, costs only the exact check). The values were the parser's
    /// longest loop, a byte at a time.
    @inline(__always)
    private static func isFieldValue(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
        var index = range.lowerBound
        let base = raw.baseAddress!
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while index + 8 <= range.upperBound {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            let control = (word &- ones &* 0x20) & ~word & highs
            let delete = word ^ (ones &* 0x7F)
            guard control | ((delete &- ones) & ~delete & highs) == 0 else { break }
            index += 8
        }
        while index < range.upperBound {
            guard isFieldValue(raw[index]) else { return false }
            index += 1
        }
        return true
    }

    /// The first LF at or after `start`, by `memchr` (vectorised; a generic search is not).
    @inline(__always)
    private static func newline(_ raw: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < raw.count, let found = memchr(raw.baseAddress! + start, 0x0A, raw.count - start) else { return nil }
        return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
    }
}
