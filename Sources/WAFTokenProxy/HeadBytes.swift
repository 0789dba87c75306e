import NIOCore

/// A head's bytes copied into one region of a `ByteBuffer` reserved up front: a head is some
/// twenty pieces, and each `ByteBuffer` write checks uniqueness and capacity again (about 3 % of
/// the proxy's CPU per request, docs/performance.md, "The proxy in detail").
struct HeadBytes {
    private let region: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    private init(_ region: UnsafeMutableRawBufferPointer) {
        self.region = region
    }

    /// Appends what `body` writes to `buffer`, which `bound` must cover: a head that would
    /// outgrow its bound is a bug in the bound, and stops the process rather than write past it.
    static func write(into buffer: inout ByteBuffer, bound: Int, _ body: (inout HeadBytes) -> Void) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { region in
            var bytes = HeadBytes(region)
            body(&bytes)
            return bytes.count
        }
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        precondition(count + bytes.count <= region.count, "a head outgrew its bound")
        (region.baseAddress! + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }
}
