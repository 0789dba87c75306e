import NIOCore

/// The proxy's buffer sizes, the same on its clients' connections and on its upstream ones.
enum ProxyBuffers {
    /// Reads of at most 16 KiB (NIO's default grows to 64 KiB), on both sides: what one read
    /// brings is held until the other side takes it, so with a thousand connections waiting for
    /// their upstream this is what they cost (TENANT-12). A request head fits whole (16 KiB).
    static let readSizes = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 16384)
    /// Writes pending for a peer that does not read stop the other side's reads at 16 KiB (NIO's
    /// default: 64 KiB); the kernel's socket buffer holds the rest.
    static let pendingWrites = ChannelOptions.Types.WriteBufferWaterMark(low: 8192, high: 16384)
}
