import NIOCore

/// The kept-alive connections of one loop to one upstream: the most recently used is taken first;
/// one unused for `idleTimeout`, one its peer closes or writes to while it waits, is closed. One
/// pool per loop, so no lock; the loop outlives it, as it does its sockets. It makes no
/// connection: when it has none, the caller makes one (after a lookup of its own, if need be).
public final class LoopStreamPool: LoopStreamDelegate {
    private unowned let loop: EpollLoop
    private let idleTimeout: UInt64
    private let maximumIdle: Int
    /// Oldest first, each with when it came back and what its owner keeps with it (what it is
    /// charged to, say), let go with it.
    private var idle: [(stream: LoopStream, since: UInt64, attachment: AnyObject?)] = []
    /// One timer for the whole pool, at the oldest's end: a timer per connection, cancelled at
    /// every reuse, would fill the loop's heap with a timeout's worth of requests.
    private var sweep: EpollLoop.Timer?

    /// `idleTimeout` in nanoseconds.
    public init(idleTimeout: UInt64, maximumIdle: Int, on loop: EpollLoop) {
        self.loop = loop
        self.idleTimeout = idleTimeout
        self.maximumIdle = maximumIdle
    }

    deinit {
        // Only once no stream waits (each holds the pool as its delegate until taken or closed):
        // the sweep's timer goes.
        closeAll()
    }

    /// Connections waiting to be used again.
    public var idleCount: Int { idle.count }

    /// The connection most recently given back, if any, with what was given back with it; the
    /// caller becomes its delegate.
    public func take() -> (stream: LoopStream, attachment: AnyObject?)? {
        guard let waiting = idle.popLast() else { return nil }
        waiting.stream.delegate = nil
        return (waiting.stream, waiting.attachment)
    }

    /// A connection that carried a whole request and answer, back to wait for the next (or
    /// closed, when it is closed already or the pool is full).
    public func release(_ stream: LoopStream, attachment: AnyObject? = nil) {
        guard stream.isOpen, idle.count < maximumIdle else { return stream.close() }
        stream.delegate = self
        // Read while waiting: a close or stray bytes must be seen now, not by the next request.
        stream.reading = true
        idle.append((stream, loop.time, attachment))
        if sweep == nil { scheduleSweep() }
    }

    public func closeAll() {
        if let sweep { loop.cancel(sweep) }
        sweep = nil
        for (stream, _, _) in idle { stream.close() }
        idle.removeAll()
    }

    private func scheduleSweep() {
        guard let oldest = idle.first else { return }
        sweep = loop.schedule(at: end(of: oldest.since)) { [weak self] in
            guard let self else { return }
            sweep = nil
            let now = loop.time
            while let first = idle.first, end(of: first.since) <= now {
                idle.removeFirst()
                first.stream.close()
            }
            scheduleSweep()
        }
    }

    /// When a connection back since `since` has waited long enough (never, past the clock's end).
    private func end(of since: UInt64) -> UInt64 {
        let (end, overflow) = since.addingReportingOverflow(idleTimeout)
        return overflow ? .max : end
    }

    private func drop(_ stream: LoopStream) {
        guard let index = idle.firstIndex(where: { $0.stream === stream }) else { return }
        idle.remove(at: index)
        stream.close()
    }

    // MARK: While a connection waits

    /// Bytes no request asked for: the connection is in no state to be used again.
    public func received(_ plaintext: ByteBuffer, on stream: LoopStream) {
        drop(stream)
    }

    public func drained(_ stream: LoopStream) {}

    public func closed(_ stream: LoopStream, end: LoopStream.End) {
        drop(stream)
    }
}
