/// Follows a chunked body (RFC 9112 §7.1) byte by byte across reads, strictly (CRLF line ends, hex
/// sizes, no control bytes): it finds where the body ends and, on request, where its data lies.
package struct ChunkedScanner {
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
    package static let maximumTrailerBytes = 16 * 1024

    package init() {}

    package var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Reads `bytes`, calling `data` with each range of chunk data in them; returns how many bytes
    /// belong to the body (fewer than all when it ends within them).
    package mutating func scan(_ bytes: UnsafeRawBufferPointer, data: (Range<Int>) -> Void = { _ in }) throws(HTTPHeadParser.Failure) -> Int {
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
