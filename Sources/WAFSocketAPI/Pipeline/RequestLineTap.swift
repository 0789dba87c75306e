import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Notices a request line that ends in a bare LF right after its version (`HTTP/1.1\n`), so that
/// the decoder's error for it can be answered 400 (a malformed request), not 505.
///
/// The parser reports one error, "invalid version", both for `HTTP/2.0` (505, a version we do not
/// speak) and for a version followed by a bare LF; the bytes tell them apart. A request line starts
/// a read in practice (a pipelined one follows the request before it in the same read), so only the
/// first `window` bytes of each read are looked at, with the last eight of the read before: a
/// constant cost per read, nothing held.
final class RequestLineTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    static let window = 512
    /// Some read held `HTTP/d.d` followed by a bare LF.
    private(set) var sawVersionWithBareLineFeed = false
    /// The last eight bytes of the read before, for a version cut off from its line end.
    private var carry: UInt64 = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !sawVersionWithBareLineFeed {
            let buffer = unwrapInboundIn(data)
            sawVersionWithBareLineFeed = buffer.withUnsafeReadableBytes { bytes in
                Self.versionEndsInBareLineFeed(bytes.prefix(Self.window), after: carry)
            }
            carry = buffer.withUnsafeReadableBytes { bytes in bytes.suffix(8).reduce(carry) { $0 << 8 | UInt64($1) } }
        }
        context.fireChannelRead(data)
    }

    /// Whether `bytes`, read after the eight bytes in `carry`, hold `HTTP/d.d` followed by `\n`.
    static func versionEndsInBareLineFeed(_ bytes: UnsafeRawBufferPointer.SubSequence, after carry: UInt64 = 0) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex, let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            // The eight bytes before the line feed, from the carry where they begin in the read before.
            var before = carry
            for position in max(bytes.startIndex, newline - 8)..<newline { before = before << 8 | UInt64(bytes[position]) }
            if isVersion(before) { return true }
            index = newline + 1
        }
        return false
    }

    /// `HTTP/d.d` as eight bytes, most significant first.
    private static func isVersion(_ word: UInt64) -> Bool {
        let byte = { (index: Int) in UInt8(truncatingIfNeeded: word >> (56 - 8 * index)) }
        return byte(0) == UInt8(ascii: "H") && byte(1) == UInt8(ascii: "T") && byte(2) == UInt8(ascii: "T") && byte(3) == UInt8(ascii: "P")
            && byte(4) == UInt8(ascii: "/") && isDigit(byte(5)) && byte(6) == UInt8(ascii: ".") && isDigit(byte(7))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
}
