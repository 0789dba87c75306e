import Glibc
import NIOCore

/// The `iovec`s of one `writev` and the buffers they point into, kept alive for the call: a
/// pointer lent by `withUnsafeReadableBytes` is valid only inside its closure, so each buffer's
/// storage is retained while the kernel reads it, as NIO's `PendingWritesManager` does. One per
/// loop (its thread only), made once: a gather costs no allocation.
final class LoopVectors {
    /// The most buffers one call writes (the rest go on the next).
    static let capacity = 64
    private let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: LoopVectors.capacity)
    private let storages = UnsafeMutableBufferPointer<Unmanaged<AnyObject>?>.allocate(capacity: LoopVectors.capacity)

    init() {
        vectors.initialize(repeating: iovec())
        storages.initialize(repeating: nil)
    }

    deinit {
        vectors.deallocate()
        storages.deallocate()
    }

    /// Calls `body` with an `iovec` per buffer (at most `capacity`), their storage held until it
    /// returns.
    func gather(_ buffers: [ByteBuffer], _ body: (UnsafeMutableBufferPointer<iovec>) -> Int) -> Int {
        let count = min(buffers.count, Self.capacity)
        for index in 0..<count {
            buffers[index].withUnsafeReadableBytesWithStorageManagement { bytes, storage in
                storages[index] = storage.retain()
                vectors[index] = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
            }
        }
        defer {
            for index in 0..<count {
                storages[index]?.release()
                storages[index] = nil
            }
        }
        return body(UnsafeMutableBufferPointer(rebasing: vectors[0..<count]))
    }
}
