import NIOCore
import WAFDaemonTransport
import WAFHTTPWire

/// The bytes and handles of one proxied request, from its head to its answer's end: what
/// `ProxyConnectionMachine` decides about, carried in its state while the request is in progress
/// (the machine's `Request`). Its upstream connection and a held challenge are the machine's. A class: the driver changes it in
/// place many times per request, and copying a value this size in and out cost a tenth of the
/// proxy's time in reference counting.
final class ProxyExchange {
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
    /// Withdraws the host-name lookup its connection waits for, if any, when the request ends first.
    var cancelLookup: (() -> Void)?
    var sentToken: String?
    /// When it went upstream (`EpollLoop.now`), for the upstream timer.
    var sentAt: UInt64 = 0
    /// The memory budget's bytes for the body kept and a challenge held: given back when they
    /// go, or with the exchange.
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

    /// Whose bytes these are, for the budget.
    var share: MemoryBudget.Share { holding.share }

    /// The request is over: its bytes and their share of the memory budget given back now, not
    /// when the last callback that names it (a token wait, a connect, a refresh) lets it go. (Its
    /// upstream connection, if any, is the machine's, which hands it back with the request's end.)
    func end() {
        cancelLookup?()
        cancelLookup = nil
        body = ByteBuffer()
        holding.releaseAll()
    }
}
