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
        machine.wantsClientReads(pilingUp: (received?.readableBytes ?? 0) > HTTPLimits.maximumHeadBytes) { $0.writable }
    }

    /// After each event: what was written goes out, and each side reads while the other can take
    /// more (a lingering connection reads to drop).
    func settle() {
        guard isOpen else { return }
        machine.upstream?.flush()
        guard isOpen else { return }
        socket.flush()
        guard isOpen else { return }
        // What the connection holds now (a head arriving, requests waiting their turn, answers
        // the client has not read, a body the upstream has not taken) is the peer's share of the
        // budget; past it, neither side is read until it is back under (TENANT-12).
        let withinBudget = buffered.hold((received?.readableBytes ?? 0) + socket.queuedBytes + (machine.upstream?.stream.queuedBytes ?? 0))
        if !withinBudget { waitForBudget() }
        socket.reading = phase == .lingering || (withinBudget && wantsClientReads)
        machine.upstream?.stream.reading = withinBudget && clientWritable
        armTimer()
    }

    /// Over its share, the connection reads nothing; it looks again in a moment, as the bytes
    /// others hold (and its own, as they go out) may have gone meanwhile. Its timeouts still run.
    private func waitForBudget() {
        guard budgetRetry == nil else { return }
        budgetRetry = loop.schedule(in: Self.budgetRetryInterval) { [weak self] in
            guard let self else { return }
            budgetRetry = nil
            settle()
        }
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
        let closing = machine.closed()
        received = nil
        stall.cancel()
        timeout.cancel()
        if let budgetRetry { loop.cancel(budgetRetry) }
        budgetRetry = nil
        closing?.upstream?.close()
        closing?.request.end()
        buffered.releaseAll()
        if let admitted = guardian.ended() { proxy.limits.release(admitted.peer, allowed: admitted.allowed) }
        worker.remove(self)
    }
}
