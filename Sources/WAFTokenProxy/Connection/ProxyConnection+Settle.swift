import NIOCore
import WAFDaemonTransport
import WAFHTTPWire
import WAFProxyLoop

/// After each event, and at the connection's end: what was written goes out, each side reads
/// while the other can take more, the guard's timer follows its phase; what a close lets go of.
extension ProxyConnection {
    // MARK: Backpressure

    /// A client whose writes queue past `ProxyUpstream.highWater` stops the upstream's reads.
    var clientWritable: Bool { socket.queuedBytes < ProxyUpstream.highWater }

    private var wantsClientReads: Bool {
        machine.wantsClientReads(pilingUp: (received?.readableBytes ?? 0) > HTTPLimits.maximumHeadBytes) {
            machine.request?.upstream?.writable ?? false
        }
    }

    /// After each event: what was written goes out, and each side reads while the other can take
    /// more (a lingering connection reads to drop).
    func settle() {
        guard isOpen else { return }
        machine.request?.upstream?.flush()
        guard isOpen else { return }
        socket.flush()
        guard isOpen else { return }
        socket.reading = phase == .lingering || wantsClientReads
        machine.request?.upstream?.stream.reading = clientWritable
        armTimer()
    }

    func drained(_ socket: LoopSocket) {
        if phase == .lingering, socket.queuedBytes == 0 { shutDownOutput() }
        settle()
    }

    func connected(_ socket: LoopSocket) {}

    func closed(_ socket: LoopSocket, error: Int32?) {
        ended()
    }

    /// The connection is gone (the client left, or it was closed here): an upstream connection in
    /// the middle of its answer cannot be reused, and its counts and timers go.
    func ended() {
        guard isOpen else { return }
        isOpen = false
        socket.close()
        let exchange = machine.closed()
        received = nil
        stall.cancel()
        timeout.cancel()
        exchange?.end()
        if let admitted { proxy.limits.release(admitted.peer, allowed: admitted.allowed) }
        admitted = nil
        worker.remove(self)
    }
}
