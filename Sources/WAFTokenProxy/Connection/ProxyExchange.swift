import NIOCore
import WAFDaemonTransport
import WAFHTTPWire

/// The bytes and handles of one proxied request, from its head to its answer's end: what
/// `ProxyConnectionMachine` decides about, carried in its state while the request is in progress
/// (the machine's `Request`). A class: the driver changes it in
/// place many times per request, and copying a value this size in and out cost a tenth of the
/// proxy's time in reference counting.
final class ProxyExchange {
    /// An upstream answer kept back (a challenge's, until the replay is decided).
    struct Answer {
        let head: HTTPHead
        let framing: HTTPFraming
        /// How its body goes to the client.
        let clientFraming: ProxyRules.ClientFraming
        var body: ByteBuffer
    }

    let route: ProxyContext.Route
    let head: HTTPHead
    /// Where the upstream gets it: the client's path normalised, below the base path.
    let target: String
    /// The body so far while it may still be replayed; what waits for the upstream when streamed.
    var body: ByteBuffer
    /// How much of a length-framed body is still to come.
    var bodyLeft = 0
    /// Where a chunked body is.
    var chunks = ChunkedScanner()
    var upstream: ProxyUpstream?
    /// Withdraws the host-name lookup its connection waits for, if any, when the request ends first.
    var cancelLookup: (() -> Void)?
    var sentToken: String?
    /// A challenge's answer, while the machine holds it.
    var held: Answer?
    /// When it went upstream (`EpollLoop.now`), for the upstream timer.
    var sentAt: UInt64 = 0
    /// The memory budget's bytes for the body kept: given back when the body goes, or with the exchange.
    let holding: MemoryBudget.Holding

    init(
        route: ProxyContext.Route, head: HTTPHead, target: String, framing: HTTPFraming, holding: MemoryBudget.Holding
    ) {
        self.holding = holding
        self.route = route
        self.head = head
        self.target = target
        body = ByteBuffer()
        if case .length(let length) = framing { bodyLeft = length }
    }

    /// The request is over: its upstream connection (if it still has one) closed, its bytes and
    /// their share of the memory budget given back now, not when the last callback that names it
    /// (a token wait, a connect, a refresh) lets it go.
    func end() {
        cancelLookup?()
        cancelLookup = nil
        dropUpstream()
        body = ByteBuffer()
        held = nil
        holding.releaseAll()
    }

    /// Closes the upstream connection, which the request can no longer use; no report of it
    /// reaches the request after.
    func dropUpstream() {
        upstream?.close()
        upstream = nil
    }
}
