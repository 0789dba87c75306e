import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A request or response head as it arrived: its bytes, and where each part of it lies in them.
/// Nothing is copied out of the bytes until asked for, so that a request relayed as it came costs
/// no string per header (the proxy's relay, `ProxyHandler`).
///
/// `HTTPHeadParser` makes one and checks it; the framing rules (`HTTPFraming`) decide how the body
/// after it is delimited.
package struct HTTPHead {
    /// One header line: the name and the value, without the surrounding whitespace.
    package struct Field {
        package let name: Range<Int>
        package let value: Range<Int>
        /// The whole line without its CRLF, to copy it as it came.
        package let line: Range<Int>
    }

    /// The head, from its first byte to its final CRLF CRLF.
    package let bytes: ByteBuffer
    /// A request's method or a response's version, the first word of the start line.
    package let first: Range<Int>
    /// A request's target or a response's status code.
    package let second: Range<Int>
    /// A response's reason phrase (a request's version).
    package let third: Range<Int>
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    package let minorVersion: Int
    package let fields: [Field]
    /// A bit for each name among the fields (`nameBit`), set by the parser: a search for a name
    /// the head does not have, most of a proxied request's searches, ends here without a look at
    /// a field. A shared bit only costs the search it would have cost anyway.
    package let names: UInt64

    /// The bit of a field name: its length, first and last byte, ASCII case folded as `equals`
    /// folds it, so that a name it matches has the same bit. (The factors keep the names the
    /// proxy looks for apart from those heads commonly have.)
    @inline(__always)
    package static func nameBit(length: Int, first: UInt8, last: UInt8) -> UInt64 {
        1 &<< UInt64((length &+ Int(first | 0x20) &* 6 &+ Int(last | 0x20) &* 3) & 63)
    }

    @inline(__always)
    package static func nameBit(_ name: StaticString) -> UInt64 {
        let count = name.utf8CodeUnitCount
        return nameBit(length: count, first: name.utf8Start[0], last: name.utf8Start[count - 1])
    }

    /// The bit of the name at `range` of `raw`, the head's bytes.
    @inline(__always)
    package static func nameBit(of range: Range<Int>, _ raw: UnsafeRawBufferPointer) -> UInt64 {
        nameBit(length: range.count, first: raw[range.lowerBound], last: raw[range.upperBound - 1])
    }

    /// False when no field is called `name`; true when one may be.
    @inline(__always)
    package func mayContain(_ name: StaticString) -> Bool { names & Self.nameBit(name) != 0 }

    // MARK: Reading it

    package func string(_ range: Range<Int>) -> String {
        bytes.withUnsafeReadableBytes { String(decoding: UnsafeRawBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }

    /// Whether the bytes in `range` are `lowercase`, ignoring ASCII case.
    package func equals(_ range: Range<Int>, lowercase: StaticString) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        return bytes.withUnsafeReadableBytes { Self.equals($0, range, lowercase: lowercase) }
    }

    /// `equals` on the head's bytes in hand: the searches below look at every field with one
    /// look at the buffer, not one per field.
    @inline(__always)
    static func equals(_ raw: UnsafeRawBufferPointer, _ range: Range<Int>, lowercase: StaticString) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        var index = range.lowerBound
        for byte in UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount) {
            // Setting bit 5 folds ASCII letters; '-' and digits have it already.
            if raw[index] | 0x20 != byte { return false }
            index += 1
        }
        return true
    }

    /// Whether the bytes in `range` are `text`, byte for byte (a method's name is case-sensitive).
    package func equals(_ range: Range<Int>, exactly text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        return bytes.withUnsafeReadableBytes { raw in
            memcmp(raw.baseAddress! + range.lowerBound, text.utf8Start, range.count) == 0
        }
    }

    /// The values of every field called `name` (lower case), in order.
    package func values(_ name: StaticString) -> [String] {
        guard mayContain(name) else { return [] }
        return fields.compactMap { equals($0.name, lowercase: name) ? string($0.value) : nil }
    }

    package func contains(_ name: StaticString) -> Bool {
        guard mayContain(name) else { return false }
        return bytes.withUnsafeReadableBytes { raw in fields.contains { Self.equals(raw, $0.name, lowercase: name) } }
    }

    /// How many fields are called `name`.
    package func count(_ name: StaticString) -> Int {
        guard mayContain(name) else { return 0 }
        return fields.reduce(0) { $0 + (equals($1.name, lowercase: name) ? 1 : 0) }
    }

    /// Calls `body` with each element of the comma-separated lists in the fields called `name`
    /// (`Connection`, `Transfer-Encoding`), without its surrounding whitespace; stops when it
    /// returns false. Bytes, not strings: a proxied request reads these every time.
    package func forEachElement(_ name: StaticString, _ body: (Range<Int>) -> Bool) {
        guard mayContain(name) else { return }
        bytes.withUnsafeReadableBytes { raw in Self.forEachElement(raw, fields, name, body) }
    }

    /// `forEachElement` on the head's bytes in hand.
    @inline(__always)
    private static func forEachElement(_ raw: UnsafeRawBufferPointer, _ fields: [Field], _ name: StaticString, _ body: (Range<Int>) -> Bool) {
        for field in fields where equals(raw, field.name, lowercase: name) {
            var start = field.value.lowerBound
            let end = field.value.upperBound
            while start <= end {
                // A byte at a time: list elements are a few bytes, shorter than a call to memchr.
                var comma = start
                while comma < end, raw[comma] != UInt8(ascii: ",") { comma += 1 }
                var low = start
                var high = comma
                while low < high, raw[low] == 0x20 || raw[low] == 0x09 { low += 1 }
                while high > low, raw[high - 1] == 0x20 || raw[high - 1] == 0x09 { high -= 1 }
                if low < high, !body(low..<high) { return }
                start = comma + 1
            }
        }
    }

    /// Whether a comma-separated list header (`Connection`, `Transfer-Encoding`) names `token`.
    package func lists(_ name: StaticString, _ token: StaticString) -> Bool {
        guard mayContain(name) else { return false }
        return bytes.withUnsafeReadableBytes { raw in
            var found = false
            Self.forEachElement(raw, fields, name) { element in
                found = Self.equals(raw, element, lowercase: token)
                return !found
            }
            return found
        }
    }

    /// The elements of a list header, in order, lower case.
    package func elements(_ name: StaticString) -> [String] {
        var elements: [String] = []
        forEachElement(name) { element in
            elements.append(string(element).lowercased())
            return true
        }
        return elements
    }

    // MARK: Requests

    package var method: String { string(first) }
    package var target: String { string(second) }
    package var isHead: Bool { first.count == 4 && equals(first, lowercase: "head") }

    /// HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless told to keep it.
    package var keepAlive: Bool {
        minorVersion == 1 ? !lists("connection", "close") : lists("connection", "keep-alive")
    }

    // MARK: Responses

    /// A response's status code, three digits (the parser checked them). Of a request, whose
    /// second word is its target, nothing asks: 0 unless that is three bytes long.
    package var status: Int {
        guard second.count == 3 else { return 0 }
        return bytes.withUnsafeReadableBytes { raw in
            let at = second.lowerBound
            return Int(raw[at] &- 0x30) &* 100 &+ Int(raw[at + 1] &- 0x30) &* 10 &+ Int(raw[at + 2] &- 0x30)
        }
    }
}
