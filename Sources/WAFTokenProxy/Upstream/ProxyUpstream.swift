import NIOCore
import WAFDaemonTransport
import WAFHTTPWire
import WAFProxyLoop

/// What an upstream connection reports to the proxied request that uses it, on their loop.
protocol UpstreamDelegate: AnyObject {
    func upstream(_ part: AnswerReader.Part)
    /// What one read brought was handed on: the client's writes go out together.
    func upstreamReadComplete()
    /// Everything written to the upstream went to the kernel, after a write found it full.
    func upstreamDrained()
    /// `upstream` closed (or its answer could not be read) before its answer ended.
    func upstreamClosed(_ upstream: ProxyUpstream, _ failure: ProxyUpstream.Failure)
}

/// One connection to the upstream, plain or TLS, for one request: it writes the request the proxy
/// built, reads the answer's head and follows its body's framing to its end (`AnswerReader`),
/// handing both on as they arrive. Between requests its stream waits in the loop's pool. What it
/// holds in memory is charged to the memory budget (TENANT-12): a fixed share for its socket and
/// TLS state, and an answer head arriving; to the request's peer while it carries a request, to
/// the pool while it waits there.
final class ProxyUpstream: LoopStreamDelegate {
    /// Why a connection ended before its answer did.
    enum Failure: Error, Equatable {
        /// It was never made: the peer refused it, or it took longer than the upstream timeout.
        case unreachable, timeout
        /// It was made, then closed, reset, or its TLS failed.
        case closed
        /// The forward proxy answered `CONNECT` with this status (EGRESS-3): no tunnel.
        case refused(Int)
    }

    let stream: LoopStream
    /// The route generation it was made for: pooled, it serves that generation's requests only.
    let generation: Int
    /// Taken from the pool (the upstream may have closed it meanwhile), not new.
    let reused: Bool
    /// The request's connection while attached; let go at every detach (`close`, the pool's
    /// `release`), which ends the cycle with it.
    var delegate: (any UpstreamDelegate)?
    /// Its share of the memory budget: `reservation`, and an answer head being read.
    let charge: MemoryBudget.Holding
    private let reservation: Int
    private let reader = AnswerReader()
    private var broken = false
    /// The socket's count of bytes written when the request in progress began to go.
    private var writtenBefore = 0

    /// A client whose writes queue past this stops the upstream's reads (and the other way round).
    static let highWater = 16384

    /// What the budget reserves for a connection (`LoopStream.reservation`).
    static func reservation(tls: Bool) -> Int { LoopStream.reservation(tls: tls) }

    /// `charge` holds `reservation` already, for the account of the request it is made for.
    init(_ stream: LoopStream, generation: Int, reused: Bool, charge: MemoryBudget.Holding, reservation: Int) {
        self.stream = stream
        self.generation = generation
        self.reused = reused
        self.charge = charge
        self.reservation = reservation
        stream.delegate = self
    }

    /// False once the connection cannot carry another request (its answer ran to the close, said
    /// `Connection: close`, or came with more than its framing).
    var reusable: Bool { reader.reusable && !broken && stream.isOpen }

    var writable: Bool { stream.queuedBytes < Self.highWater }

    /// Not one byte of the request in progress reached the kernel: the upstream cannot have seen it.
    var wroteNothing: Bool { stream.bytesWritten == writtenBefore }

    /// A request goes out now: read its answer (to a HEAD: no body; for a client that cannot read
    /// chunks: their data).
    func expectAnswer(toHead: Bool, decodeChunks: Bool) {
        writtenBefore = stream.bytesWritten
        reader.expectAnswer(toHead: toHead, decodeChunks: decodeChunks)
    }

    func send(_ bytes: ByteBuffer) { stream.write(bytes) }

    /// What was sent goes out; a connection that fails in it reports its close from inside.
    func flush() { stream.flush() }

    /// Closes it for good; the delegate hears nothing more, and its share goes back.
    func close() {
        delegate = nil
        stream.close()
        charge.releaseAll()
    }

    func received(_ plaintext: ByteBuffer, on stream: LoopStream) {
        // Told at the end even if a part let the connection go: what the parts wrote must go out.
        guard let reading = delegate, !reader.isIdle else {
            // Bytes nobody asked for: this connection is in no state to be reused.
            broken = true
            return close()
        }
        do {
            // The delegate as it is at each part: a part it was told may have let the connection go.
            try reader.read(plaintext) { part in
                guard let delegate else { return false }
                delegate.upstream(part)
                return delegate === self.delegate
            }
        } catch {
            broken = true
            let delegate = self.delegate
            close()
            delegate?.upstreamClosed(self, .closed)
            return
        }
        // A head arriving in pieces is held here, and a TLS record arriving in pieces in its
        // session: charged, and past the budget not read on (the upstream timeout ends the wait).
        if stream.isOpen, !charge.hold(reservation + reader.bufferedBytes + stream.heldBeyond) { stream.reading = false }
        reading.upstreamReadComplete()
    }

    func drained(_ stream: LoopStream) {
        delegate?.upstreamDrained()
    }

    func closed(_ stream: LoopStream, end: LoopStream.End) {
        broken = true
        charge.releaseAll()
        // A close is the end of an answer framed by it; a reset or a failure cuts any answer short.
        let delegate = self.delegate
        if end == .closed,
            reader.closed({ part in
                delegate?.upstream(part)
                return true
            })
        {
            delegate?.upstreamReadComplete()
            return
        }
        let failure: Failure =
            switch end {
            case .timedOut: .timeout
            case .unreachable: .unreachable
            case .closed, .failed: .closed
            case .refused(let status): .refused(status)
            }
        delegate?.upstreamClosed(self, failure)
    }
}
