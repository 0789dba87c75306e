import NIOCore
import WAFDaemonTransport
import WAFProxyLoop
import WAFTokenCore

/// Kept-alive upstream connections of one loop: a request takes a connection of its own loop, so
/// that nothing crosses threads and no lock is taken per request. Pooled connections serve the
/// route generation they were made for; a newer route lets the older ones go. Every connection is
/// charged to the memory budget (TENANT-12): to the peer whose request it carries, to the pool's
/// own account while it waits; one the pool's share cannot take is closed, not kept.
final class UpstreamPool {
    /// Makes a new connection for `route` on the loop (a test's scripted upstream in place of TCP).
    typealias Connector = @Sendable (ProxyRoute, EpollLoop) -> LoopStream?

    /// What asking for a connection gives.
    enum Outcome {
        case connected(ProxyUpstream)
        case failed(ProxyUpstream.Failure)
        /// The peer's share of the memory budget cannot take another connection: 503.
        case overBudget
    }

    private unowned let loop: EpollLoop
    private let budget: MemoryBudget
    /// The idle connections' share, kept rather than looked up per request.
    private let poolShare: MemoryBudget.Share
    private let resolver: UpstreamResolver
    private let connector: Connector?
    private var idle: LoopStreamPool
    private var generation = 0

    static let maximumIdle = 256
    static let idleTimeout: UInt64 = 55_000_000_000

    init(on loop: EpollLoop, budget: MemoryBudget, resolver: UpstreamResolver, connector: Connector? = nil) {
        self.loop = loop
        self.budget = budget
        poolShare = budget.share(.pool)
        self.resolver = resolver
        self.connector = connector
        idle = LoopStreamPool(idleTimeout: Self.idleTimeout, maximumIdle: Self.maximumIdle, on: loop)
    }

    /// The idle connection most recently given back for `route`'s generation, charged to
    /// `share` from now on; nil when there is none, or `share` cannot take it (it stays).
    func takeIdle(for route: ProxyRoute, share: MemoryBudget.Share) -> ProxyUpstream? {
        if route.generation > generation {
            idle.closeAll()
            generation = route.generation
        }
        guard route.generation == generation, let (stream, attachment) = idle.take() else { return nil }
        guard let charge = attachment as? MemoryBudget.Holding, charge.move(to: share) else {
            idle.release(stream, attachment: attachment)
            return nil
        }
        return ProxyUpstream(stream, generation: route.generation, reused: true, charge: charge, reservation: charge.bytes)
    }

    /// A new connection for `route`, charged to `share`, under way; on a name's lookup,
    /// later. `done` runs once, on the loop: before `connect` returns when no lookup is needed.
    /// Returned: the lookup's number, for `cancelLookup` when the request goes first (nil: no
    /// lookup waits).
    @discardableResult
    func connect(_ route: ProxyRoute, for share: MemoryBudget.Share, _ done: @escaping (Outcome) -> Void) -> UInt64? {
        let reservation = ProxyUpstream.reservation(tls: route.tls != nil)
        let charge = MemoryBudget.Holding(budget, share: share)
        guard charge.grow(by: reservation) else {
            done(.overBudget)
            return nil
        }
        let made = { (stream: LoopStream?) -> Outcome in
            guard let stream else { return .failed(.unreachable) }
            return .connected(ProxyUpstream(stream, generation: route.generation, reused: false, charge: charge, reservation: reservation))
        }
        if let connector {
            done(made(connector(route, loop)))
            return nil
        }
        // Through the provider's forward proxy, when it has one (EGRESS-1): its address is the one
        // looked up and connected to; the upstream's name goes in the CONNECT, and TLS is the
        // upstream's, end to end.
        let upstream = route.settings.upstream
        let (host, port) = route.settings.forwardProxy.map { ($0.host, $0.port) } ?? (upstream.host, upstream.port)
        // An address needs no lookup: nothing runs off the loop.
        if let address = try? SocketAddress(ipAddress: host, port: port) {
            done(made(Self.connect(to: [address], route, on: loop)))
            return nil
        }
        return resolver.lookUp(host, port: port, on: loop) { [loop] found in
            // Every address, in the system's order: one that refuses the connect hands it to the next.
            guard case .success(let addresses) = found, !addresses.isEmpty else { return done(.failed(.unreachable)) }
            done(made(Self.connect(to: addresses, route, on: loop)))
        }
    }

    private static func connect(to addresses: [SocketAddress], _ route: ProxyRoute, on loop: EpollLoop) -> LoopStream? {
        let upstream = route.settings.upstream
        // SNI names a host, never an address; the certificate is checked for either.
        let tls = route.tls.map { ($0, upstream.host) }
        let timeout = route.upstreamTimeoutNanoseconds
        guard let forward = route.settings.forwardProxy else { return try? LoopStream(to: addresses, tls: tls, timeout: timeout, on: loop) }
        let tunnel = LoopStream.Tunnel(authority: upstream.connectAuthority, authorization: forward.authorization)
        return try? LoopStream(through: addresses, tunnel: tunnel, tls: tls, timeout: timeout, on: loop)
    }

    /// The request that began lookup `id` is gone (`connect`'s number).
    func cancelLookup(_ id: UInt64) {
        resolver.cancel(id)
    }

    /// Back into the pool for the next request on this loop when it carried a whole request and
    /// answer of the pool's generation, and the pool's share of the budget takes it; closed otherwise.
    func release(_ upstream: ProxyUpstream) {
        upstream.delegate = nil
        guard upstream.reusable, upstream.generation == generation, upstream.charge.move(to: poolShare) else { return upstream.close() }
        idle.release(upstream.stream, attachment: upstream.charge)
    }

    /// Connections waiting to be used again.
    var idleCount: Int { idle.idleCount }

    /// Closes every idle connection (the proxy stops, or its upstream changed).
    func closeIdle() {
        idle.closeAll()
    }
}
