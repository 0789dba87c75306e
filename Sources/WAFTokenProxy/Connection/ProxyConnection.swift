import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFHTTPWire
import WAFProxyLoop
import WAFTokenCore

/// One client connection of the proxy, on its loop, and the driver of its
/// `ProxyConnectionMachine`: the machine decides, this performs. Each request head is checked strictly
/// (`HTTPHeadParser`, `HTTPFraming`: nothing a server could read differently gets through), sent
/// to the configured upstream as it came with the token added (`ProxyRules` decide what goes and
/// what a challenge leads to), and its answer relayed as it arrives. No HTTP codec decodes and
/// re-encodes it on either side, and no channel pipeline carries it: both were most of the
/// proxy's time (docs/performance.md, "The proxy in detail"). Reads on each side follow the other
/// side's queue, so a slow client or upstream makes the proxy wait, not buffer. The connection's
/// guard (who the peer is, its limits and timeouts, a clean close) is in `ProxyConnection+Guard`.
final class ProxyConnection: LoopSocketDelegate {
    typealias Machine = ProxyConnectionMachine<ProxyExchange, ProxyUpstream>
    typealias Ending = Machine.Ending

    let proxy: ProxyContext
    unowned let worker: ProxyWorker
    let socket: LoopSocket
    let connection = ConnectionState()
    /// Every decision about the connection, and its request in progress.
    var machine = Machine()
    /// 504 when the upstream sends nothing for `proxy.upstreamTimeoutSec` (connect, answer or body).
    /// (Its timer holds it weakly, and it dies with the connection: `unowned` is safe, and leaves
    /// the connection without the side table a weak reference would give it.)
    /// Constants, not lazy: they are read several times a request.
    let stall: LoopTimeout
    /// The guard's idle, request or linger timeout, whichever its phase runs.
    let timeout: LoopTimeout
    /// The connection's guard: its admission, phases, deadlines and the drain window (`+Guard`).
    var guardian = ConnectionGuard()
    /// Bytes from the client not yet taken: a head arriving, body, or the next requests.
    var received: ByteBuffer?
    /// The budget's bytes for what the connection holds between events (`settle`): `received`,
    /// and the queues to the client and to the upstream.
    private(set) lazy var buffered = MemoryBudget.Holding(proxy.budget, uid: connection.peer?.uid ?? .max)
    /// Set while the connection waits for its share of the budget to free up.
    var budgetRetry: EpollLoop.Timer?
    static let budgetRetryInterval: UInt64 = 100_000_000
    /// How far the head arriving has been looked through.
    private var headScanned = 0
    private var processing = false
    /// Once closed (by either side): nothing more happens on it.
    /// (Set by `ended` alone, in `ProxyConnection+Settle`.)
    var isOpen = true

    /// The worker's, held here: each read through the unowned `worker` costs a check and a retain.
    let loop: EpollLoop
    /// The route in force as this connection last read it (`route`).
    private var currentRoute: ProxyRoute

    /// The route in force: the one read last while no reload installed another (one atomic
    /// load), else the new one, read under the context's lock (twice a request, before).
    var route: ProxyRoute {
        if proxy.installedGeneration == currentRoute.generation { return currentRoute }
        currentRoute = proxy.route
        return currentRoute
    }

    init(_ socket: LoopSocket, proxy: ProxyContext, worker: ProxyWorker) {
        self.socket = socket
        self.proxy = proxy
        self.worker = worker
        loop = worker.loop
        currentRoute = proxy.route
        stall = LoopTimeout(on: worker.loop)
        timeout = LoopTimeout(on: worker.loop)
        stall.expired = { [unowned self] in upstreamTimedOut() }
        timeout.expired = { [unowned self] in timedOut() }
        socket.delegate = self
    }

    // MARK: The client's requests

    func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        // Read and dropped while lingering: unread, it would turn the close into a reset the
        // client cannot tell from a request that failed midway.
        guard bytesArrived(), !machine.isClosed else { return }
        var bytes = bytes
        if var held = received, held.readableBytes > 0 {
            received = nil
            held.writeBuffer(&bytes)
            received = held
        } else {
            received = bytes
        }
        process()
        settle()
    }

    /// Takes what arrived: the next request's head, the body of the one in progress; requests
    /// that follow one not yet answered wait for its answer.
    func process() {
        // Called from channelRead, and from finish() once a kept-alive answer is out (a pipelined
        // request may go next). Should an answer finish while this loop runs (finish() reached
        // from inside takeHead or takeBody), the nested call returns here at once, and this loop,
        // on its next turn, takes what is left: bytes are taken in one place, in order.
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while !machine.isClosed, var bytes = received, bytes.readableBytes > 0 {
            received = nil
            defer { if !machine.isClosed, bytes.readableBytes > 0 { received = bytes } }
            switch machine.reading {
            case .head: guard takeHead(&bytes) else { return }
            case .body(let exchange, let framing): takeBody(&bytes, exchange, framing)
            case .nothing: return
            }
        }
    }

    /// False while the head is incomplete.
    private func takeHead(_ bytes: inout ByteBuffer) -> Bool {
        bytes.moveReaderIndex(forwardBy: bytes.withUnsafeReadableBytes(HTTPHeadParser.leadingEmptyLines))
        guard bytes.readableBytes > 0 else { return true }
        do {
            let scanned = headScanned
            guard
                let end = try bytes.withUnsafeReadableBytes({ raw throws(HTTPHeadParser.Failure) in
                    try HTTPHeadParser.headEnd(raw, limit: HTTPLimits.maximumHeadBytes, from: scanned)
                })
            else {
                headScanned = bytes.readableBytes
                return false
            }
            headScanned = 0
            let head = try HTTPHeadParser.request(bytes.readSlice(length: end)!)
            // A head read whole whose framing cannot be trusted: refused, and to a HEAD headless.
            let framing: HTTPFraming
            do throws(HTTPHeadParser.Failure) {
                framing = try HTTPFraming.request(head)
            } catch {
                refuse(DaemonError(error), to: head)
                return true
            }
            begin(head, framing)
        } catch {
            // Bytes that cannot be trusted to end where they seem to: the connection closes after the error.
            refuse(DaemonError(unreadable: error))
        }
        return true
    }

    private func begin(_ head: HTTPHead, _ framing: HTTPFraming) {
        // One route for the decision and the request: a reload between two reads could let the
        // peer in under the old lists and send it on the new identity's route.
        let route = route
        guard stillAllowed(under: route) else {
            return refuse(.proxyForbidden, to: head)
        }
        if head.first.count == 7, head.equals(head.first, lowercase: "connect") {
            return refuse(.connectNotSupported, to: head)
        }
        let target: String
        switch ProxyRules.upstreamTarget(for: head, upstream: route.settings.upstream) {
        case .success(let normalized): target = normalized
        case .failure(let refusal): return refuse(refusal, to: head)
        }
        let replayLimit = route.settings.replayBufferBytes
        let exchange = ProxyExchange(
            route: route, head: head, target: target, framing: framing,
            holding: MemoryBudget.Holding(proxy.budget, share: buffered.share))
        let begin = machine.requestBegan(
            exchange, framing: framing, streams: ProxyRules.bodyPlan(framing, replayBufferBytes: replayLimit) == .stream, keepAlive: head.keepAlive,
            upgrade: head.contains("upgrade"), expectsContinue: framing != .none && head.lists("expect", "100-continue"), replayLimit: replayLimit,
            idempotent: ProxyRules.isIdempotent(head))
        switch begin {
        case .serve:
            requestStarted()
            dispatch(exchange)
        case .readBody(let sendContinue), .dispatchAndStream(let sendContinue):
            // The proxy takes every body (to keep it for a replay): the client need not wait to send it.
            if sendContinue { socket.write(HTTPHeadWriter.continue) }
            if case .dispatchAndStream = begin { dispatch(exchange) }
        }
    }

    /// Whether the peer may use the proxy under the lists in force, decided again after a reload.
    func stillAllowed(under route: ProxyContext.Route? = nil) -> Bool {
        let route = route ?? self.route
        return connection.allowed(under: route.connection.policy, generation: UInt64(route.generation))
    }

    /// `exchange` is the one in progress; what it sets off may end it (`machine.request` is then another, or nil).
    private func takeBody(_ bytes: inout ByteBuffer, _ exchange: ProxyExchange, _ framing: HTTPFraming) {
        switch framing {
        case .length:
            let piece = bytes.readSlice(length: min(exchange.bodyLeft, bytes.readableBytes)) ?? ByteBuffer()
            exchange.bodyLeft -= piece.readableBytes
            bodyArrived(piece, exchange)
            if machine.request === exchange, exchange.bodyLeft == 0 { requestEnded(exchange) }
        case .chunked:
            var scanner = exchange.chunks
            let start = bytes.readerIndex
            var pieces: [ByteBuffer] = []
            do {
                let used = try bytes.withUnsafeReadableBytes { raw throws(HTTPHeadParser.Failure) in
                    try scanner.scan(raw) { pieces.append(bytes.getSlice(at: start + $0.lowerBound, length: $0.count)!) }
                }
                bytes.moveReaderIndex(forwardBy: used)
            } catch {
                bytes.clear()
                return bodyBroke(error)
            }
            exchange.chunks = scanner
            for piece in pieces where machine.request === exchange { bodyArrived(piece, exchange) }
            if scanner.isDone, machine.request === exchange { requestEnded(exchange) }
        case .none, .untilClose:
            requestEnded(exchange)
        }
    }

    private func bodyArrived(_ piece: ByteBuffer, _ exchange: ProxyExchange) {
        // A body is kept for a replay only within the memory budget (TENANT-12); past it, it streams.
        let mayKeep = !machine.keepsBodyForReplay || exchange.holding.grow(by: piece.readableBytes)
        switch machine.bodyArrived(piece.readableBytes, mayKeep: mayKeep) {
        case .forward(let framing, let upstream):
            send(piece, to: upstream, framing: framing)
        case .keep:
            var piece = piece
            exchange.body.writeBuffer(&piece)
        case .keepAndDispatch:
            var piece = piece
            exchange.body.writeBuffer(&piece)
            dispatch(exchange)
        }
    }

    private func requestEnded(_ exchange: ProxyExchange) {
        let (end, tellGuard) = machine.requestEnded()
        if tellGuard { requestStarted() }
        switch end {
        case .dispatch:
            dispatch(exchange)
        case .endUpstreamBody(let upstream, let chunked):
            if chunked { upstream.send(ByteBuffer(staticString: "0\r\n\r\n")) }
            upstream.flush()
        case .wait:
            break
        }
    }

    /// Body bytes to the upstream as its request is framed: as they are, or as a chunk.
    func send(_ piece: ByteBuffer, to upstream: ProxyUpstream, framing: ProxyRules.Framing) {
        // Nothing to send: as a chunk, it would be the zero-size one that ends the body.
        guard piece.readableBytes > 0 else { return }
        guard framing == .chunked else { return upstream.send(piece) }
        var chunk = ByteBuffer()
        chunk.reserveCapacity(piece.readableBytes + 24)
        chunk.writeString(String(piece.readableBytes, radix: 16))
        chunk.writeStaticString("\r\n")
        chunk.writeImmutableBuffer(piece)
        chunk.writeStaticString("\r\n")
        upstream.send(chunk)
    }

    /// `head`: the request refused, when it was read (before its exchange exists).
    private func refuse(_ error: DaemonError, to head: HTTPHead? = nil) {
        received = nil
        answerError(error, machine.refuse(), headOnly: head?.isHead ?? false)
    }

    /// A body that cannot be read on: refused while none of it went upstream, closed after.
    private func bodyBroke(_ failure: any Error) {
        received = nil
        switch machine.bodyBroke() {
        case .closeClient(let exchange, let upstream):
            upstream?.close()
            closeClient(exchange)
        case .answer(let ending):
            answerError(DaemonError(unreadable: failure), ending)
        }
    }
}
