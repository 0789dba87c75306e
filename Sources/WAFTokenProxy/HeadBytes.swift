import NIOCore

/// A head's bytes copied into one region of a `ByteBuffer` reserved up front: a head is some
/// twenty pieces, and each `ByteBuffer` write checks uniqueness and capacity again (about 3 % of
/// the proxy's CPU per request, docs/performance.md, "The proxy in detail").
struct HeadBytes {
    private let region: UnsafeMutableRawBufferPointer
    private(set) var count = 0
    /// A piece did not fit: what was appended is discarded, and `write` tries again with more.
    private var outgrown = false

    private init(_ region: UnsafeMutableRawBufferPointer) {
        self.region = region
    }

    /// Appends what `body` writes to `buffer`, which `bound` should cover. A head that outgrows
    /// it (a bound counted wrong) is written again with twice the room: never past the region,
    /// and never a crash a client's request could set off.
    static func write(into buffer: inout ByteBuffer, bound: Int, _ body: (inout HeadBytes) -> Void) {
        var room = max(bound, 64)
        // Nothing to append to (a new buffer, the worker's spare, never a slice): storage no
        // larger than a new one's, the power of two under twice the room, which is what the
        // capacity check keeps. The spare's is used again when nothing else holds it; when
        // something does, `clear(minimumCapacity:)` allocates at the room at once rather than at
        // the old size and then again. A larger one goes.
        if buffer.readableBytes == 0 {
            if buffer.capacity > 0, buffer.capacity < 2 * room {
                buffer.clear(minimumCapacity: room)
            } else {
                buffer = ByteBufferAllocator().buffer(capacity: room)
            }
        }
        while true {
            var outgrown = false
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { region in
                var bytes = HeadBytes(region)
                body(&bytes)
                outgrown = bytes.outgrown
                return outgrown ? 0 : bytes.count
            }
            guard outgrown else { return }
            room *= 2
        }
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, !outgrown else { return }
        guard count + bytes.count <= region.count else {
            outgrown = true
            return
        }
        (region.baseAddress! + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A native string's bytes where they are (a small one's from the stack), without the copy
    /// `withUTF8` needs of a `var`: a retain and a release per piece.
    @inline(__always)
    mutating func append(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) == nil {
            append(Array(text.utf8))
        }
    }

    @inline(__always)
    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }
}
