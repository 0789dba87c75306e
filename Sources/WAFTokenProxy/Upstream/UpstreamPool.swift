import NIOCore
import WAFProxyLoop
import WAFTokenCore

/// Kept-alive upstream connections of one loop: a request takes a connection of its own loop, so
/// that nothing crosses threads and no lock is taken per request. Pooled connections serve the
/// route generation they were made for; a newer route lets the older ones go.
final class UpstreamPool {
    /// Makes a new connection for `route` on the loop (a test's scripted upstream in place of TCP).
    typealias Connector = @Sendable (ProxyRoute, EpollLoop) -> LoopStream?

    private unowned let loop: EpollLoop
    private let resolver: UpstreamResolver
    private let connector: Connector?
    private var idle: LoopStreamPool
    private var generation = 0

    static let maximumIdle = 256
    static let idleTimeout: UInt64 = 55_000_000_000

    init(on loop: EpollLoop, resolver: UpstreamResolver, connector: Connector? = nil) {
        self.loop = loop
        self.resolver = resolver
        self.connector = connector
        idle = LoopStreamPool(idleTimeout: Self.idleTimeout, maximumIdle: Self.maximumIdle, on: loop)
    }

    /// The idle connection most recently given back for `route`'s generation, if any.
    func takeIdle(for route: ProxyRoute) -> ProxyUpstream? {
        if route.generation > generation {
            idle.closeAll()
            generation = route.generation
        }
        guard route.generation == generation, let stream = idle.take() else { return nil }
        return ProxyUpstream(stream, generation: route.generation, reused: true)
    }

    /// A new connection for `route`, under way; on a name's lookup, later. `done` runs once, on
    /// the loop: before `connect` returns when no lookup is needed. Returned: the lookup's number,
    /// for `cancelLookup` when the request goes first (nil: no lookup waits).
    @discardableResult
    func connect(_ route: ProxyRoute, _ done: @escaping (Result<ProxyUpstream, ProxyUpstream.Failure>) -> Void) -> UInt64? {
        if let connector {
            guard let stream = connector(route, loop) else {
                done(.failure(.unreachable))
                return nil
            }
            done(.success(ProxyUpstream(stream, generation: route.generation, reused: false)))
            return nil
        }
        let upstream = route.settings.upstream
        // An address needs no lookup: nothing runs off the loop.
        if let address = try? SocketAddress(ipAddress: upstream.host, port: upstream.port) {
            done(Self.connect(to: [address], route, on: loop))
            return nil
        }
        return resolver.lookUp(upstream.host, port: upstream.port, on: loop) { [loop] found in
            // Every address, in the system's order: one that refuses the connect hands it to the next.
            guard case .success(let addresses) = found, !addresses.isEmpty else { return done(.failure(.unreachable)) }
            done(Self.connect(to: addresses, route, on: loop))
        }
    }

    private static func connect(
        to addresses: [SocketAddress], _ route: ProxyRoute, on loop: EpollLoop
    ) -> Result<ProxyUpstream, ProxyUpstream.Failure> {
        let upstream = route.settings.upstream
        // SNI names a host, never an address; the certificate is checked for either.
        let tls = route.tls.map { ($0, upstream.host) }
        let timeout = route.settings.upstreamTimeout.loopNanoseconds
        guard let stream = try? LoopStream(to: addresses, tls: tls, timeout: timeout, on: loop) else { return .failure(.unreachable) }
        return .success(ProxyUpstream(stream, generation: route.generation, reused: false))
    }

    /// The request that began lookup `id` is gone (`connect`'s number).
    func cancelLookup(_ id: UInt64) {
        resolver.cancel(id)
    }

    /// Back into the pool for the next request on this loop when it carried a whole request and
    /// answer of the pool's generation; closed otherwise.
    func release(_ upstream: ProxyUpstream) {
        upstream.delegate = nil
        guard upstream.reusable, upstream.generation == generation else { return upstream.close() }
        idle.release(upstream.stream)
    }

    /// Closes every idle connection (the proxy stops, or its upstream changed).
    func closeIdle() {
        idle.closeAll()
    }
}
