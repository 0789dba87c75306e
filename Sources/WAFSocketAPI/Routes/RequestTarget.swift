/// A request's target split into its path and query, strictly: a query value is percent-decoded
/// and must be printable text (`%00` is no part of a number of seconds).
struct RequestTarget: Sendable, Equatable {
    let path: String
    let query: [String: String]

    /// Nil for a target that is not origin-form or holds a value that does not decode.
    init?(_ uri: String) {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let rawPath = parts.first, rawPath.hasPrefix("/"), let path = Self.decode(rawPath) else { return nil }
        self.path = path
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let field = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = Self.decode(field[0]), let value = Self.decode(field.count > 1 ? field[1] : "") else { return nil }
                if query[name] == nil { query[name] = value }
            }
        }
        self.query = query
    }

    /// Percent-decodes `text` (and `+` as a space); nil for a bad escape or a control character.
    static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hex), let low = iterator.next().flatMap(hex) else { return nil }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A number of seconds above 0 and at most `maximum`: digits, at most one dot, nothing else.
    static func seconds(_ text: String, maximum: Double) -> Double? {
        guard !text.isEmpty, text.utf8.count <= 16, text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }),
            text.utf8.filter({ $0 == 0x2E }).count <= 1, let value = Double(text), value > 0, value <= maximum
        else { return nil }
        return value
    }
}
