import NIOCore
import Synchronization
import WAFDaemonTransport
import WAFProxyLoop
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// What the proxy keeps on each of its loops: the listener's share of the accepting, the
/// connections accepted there, and the loop's upstream pool. Touched on its loop only.
final class ProxyWorker {
    let loop: EpollLoop
    let proxy: ProxyContext
    let pool: UpstreamPool
    let peers: PeerSource
    private var listener: LoopListener?
    private var connections: [ObjectIdentifier: ProxyConnection] = [:]
    /// Once a stop began: when it must be over (told to a connection accepted after it, too).
    private var stopDeadline: UInt64?
    /// Connections open on every loop of the proxy, which its stop waits for.
    private let open: OpenConnections
    /// What this loop's requests take from the provider's snapshot: read again only when the
    /// route or the publication changed.
    private var tokenView: TokenView?
    /// The storage the loop's heads are written into, used again once the socket has written the
    /// last head out and let it go (a head still queued keeps its own: the next one is written
    /// into new storage). Two allocations a request fewer. A head never sits in more storage than
    /// a new buffer for it would have (`HeadBytes.write`): what the budget counts of it, its bytes,
    /// is what it was before. The spare itself is the loop's, at most `spareHeadCapacity`.
    private var spareHead = ByteBuffer()
    static let spareHeadCapacity = 4096

    /// The token a route's requests carry, and where its cookie goes, for one route and one
    /// publication of the provider's snapshot. A class, handed out by reference: as a tuple kept
    /// in an optional it was copied field by field through the runtime's generic value witnesses,
    /// twice a request (1.3 % of the proxy's CPU, docs/performance.md).
    final class TokenView {
        let route: ProxyRoute
        let publication: UInt64
        let token: String?
        let setTokenCookie: Bool
        let cookiePath: String
        /// `cookiePath` is `/` (the default), which every origin-form path is below.
        private let everyPath: Bool

        init(route: ProxyRoute, publication: UInt64, token: String?, setTokenCookie: Bool, cookiePath: String) {
            self.route = route
            self.publication = publication
            self.token = token
            self.setTokenCookie = setTokenCookie
            self.cookiePath = cookiePath
            everyPath = cookiePath == "/"
        }

        /// COOK-1, COOK-2: as the provider's cookie manager says, from the same snapshot.
        func cookieApplies(toPath path: String) -> Bool {
            guard setTokenCookie else { return false }
            if everyPath { return path.utf8.first == UInt8(ascii: "/") }
            return WAFCookie.pathMatches(requestPath: path, cookiePath: cookiePath)
        }
    }

    /// An empty buffer to write a head into, on the spare's storage: `HeadBytes.write` uses that
    /// again if nothing else holds it and it is of the head's size.
    func headBuffer() -> ByteBuffer {
        var buffer = spareHead
        spareHead = ByteBuffer()
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return buffer
    }

    /// `head` was written and handed to a socket: its storage is the spare from now on, if small.
    func written(_ head: ByteBuffer) {
        if head.capacity <= Self.spareHeadCapacity { spareHead = head }
    }

    init(loop: EpollLoop, proxy: ProxyContext, peers: PeerSource, open: OpenConnections) {
        self.loop = loop
        self.proxy = proxy
        self.peers = peers
        self.open = open
        pool = UpstreamPool(on: loop, budget: proxy.budget, resolver: proxy.resolver, connector: proxy.connector)
    }

    /// The route's token and cookie rule, derived once per publication of the provider's
    /// snapshot rather than per request (a lock and a copy of the whole snapshot, each time).
    func tokenView(for route: ProxyRoute) -> TokenView {
        let publication = proxy.provider.publications
        if let cached = tokenView, cached.route === route, cached.publication == publication { return cached }
        let published = proxy.provider.published(for: route.settings.identity)
        let view = TokenView(
            route: route, publication: published.publication, token: published.token?.value,
            setTokenCookie: published.configuration.setTokenCookie, cookiePath: published.configuration.tokenCookiePath)
        tokenView = view
        return view
    }

    /// Takes connections from the listening socket (this loop's own descriptor of it).
    func listen(on descriptor: Int32) throws(LoopError) {
        let listener = try LoopListener(adopting: descriptor, on: loop) { [unowned self] socket in accept(socket) }
        // Logged once when an episode at the descriptor limit begins and once when it ends, as
        // the daemon's other listeners do (`AcceptLimitHandler`), never per attempt.
        var since: UInt64 = 0
        listener.limitReached = { [proxy] error in
            since = EpollLoop.now
            AcceptLimitHandler.logReached(listener: "proxy", error: error, logger: proxy.logger)
        }
        listener.limitLifted = { [proxy] refusals in
            AcceptLimitHandler.logLifted(listener: "proxy", seconds: Double(EpollLoop.now - since) / 1e9, refusals: refusals, logger: proxy.logger)
        }
        listener.failed = { [proxy] error in proxy.logger.error("proxy: a loop stopped accepting connections: \(error)") }
        self.listener = listener
    }

    private func accept(_ socket: LoopSocket) {
        if peers == .loopback {
            // An answer that comes in several reads must not wait for the client's delayed ACK.
            var one: Int32 = 1
            setsockopt(socket.descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let connection = ProxyConnection(socket, proxy: proxy, worker: self)
        connections[ObjectIdentifier(connection)] = connection
        open.count.add(1, ordering: .relaxed)
        connection.start()
        if let stopDeadline { connection.stopBegan(deadline: stopDeadline) }
        connection.settle()
    }

    func remove(_ connection: ProxyConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        open.count.subtract(1, ordering: .relaxed)
        listener?.descriptorsFreed()
    }

    /// No new connections; what is under way is answered by `deadline`.
    func stopBegan(deadline: UInt64) {
        listener?.close()
        listener = nil
        stopDeadline = deadline
        pool.closeIdle()
        for connection in Array(connections.values) {
            connection.stopBegan(deadline: deadline)
            connection.settle()
        }
    }

    /// The stop's deadline passed: what is left closes now.
    func closeAll() {
        listener?.close()
        listener = nil
        for connection in Array(connections.values) { connection.ended() }
        pool.closeIdle()
    }
}

/// How many connections a proxy has open, on all its loops.
final class OpenConnections: Sendable {
    let count = Atomic<Int>(0)
}

/// Who the peer of a proxy connection is: the Unix socket's `SO_PEERCRED`, or, on loopback TCP,
/// the owner of the client's end (`LoopbackPeer`).
enum PeerSource {
    case unixSocket, loopback

    func credentials(of descriptor: Int32) -> PeerCredentials? {
        switch self {
        case .unixSocket:
            var credentials = SocketPeerCredentials()
            var length = socklen_t(MemoryLayout<SocketPeerCredentials>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SocketPeerCredentials.option, &credentials, &length) == 0 else { return nil }
            return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
        case .loopback:
            guard let client = Self.address(descriptor, getpeername), let server = Self.address(descriptor, getsockname),
                let found = LoopbackPeer.credentials(client: client, server: server)
            else { return nil }
            return PeerCredentials(pid: found.pid, uid: found.uid, gid: found.gid)
        }
    }

    private static func address(
        _ descriptor: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(descriptor, $0, &length) } }
        guard got == 0 else { return nil }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer -> SocketAddress? in
            switch family {
            case AF_INET: pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: "") }
            case AF_INET6: pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: "") }
            default: nil
            }
        }
    }
}
