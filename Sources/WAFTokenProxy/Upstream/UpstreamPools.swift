import NIOCore
import NIOPosix
import NIOSSL
import WAFTokenCore

/// A connection to the upstream, with its handler; used on its channel's event loop only.
struct UpstreamConnection {
    let channel: any Channel
    let handler: UpstreamHandler
    /// Taken from the pool (it may have been closed by the upstream meanwhile), not new.
    let reused: Bool

    /// The connection `acquire` gave, looked up on its event loop.
    init(_ acquired: UpstreamPools.Acquired) throws {
        channel = acquired.channel
        handler = try acquired.channel.pipeline.syncOperations.handler(type: UpstreamHandler.self)
        reused = acquired.reused
    }
}

/// Kept-alive upstream connections, one pool per event loop: a request takes a connection of its
/// own loop, so that nothing crosses threads and no lock is taken per request.
final class UpstreamPools: Sendable {
    /// Makes a new connection to the route's upstream on the loop given.
    typealias Connector = @Sendable (ProxyRoute, any EventLoop) -> EventLoopFuture<Acquired>

    private let pools: [ObjectIdentifier: NIOLoopBoundBox<Pool>]
    private let connector: Connector
    /// Host-name lookups of new connections; the proxy's stop waits for them (issue 36).
    let resolver: UpstreamResolver

    static let maximumIdlePerLoop = 256
    static let idleTimeout = TimeAmount.seconds(55)

    /// `connector`: a test's scripted upstream in place of TCP.
    init(group: any EventLoopGroup, connector: Connector? = nil, resolver: UpstreamResolver = UpstreamResolver()) {
        self.resolver = resolver
        self.connector = connector ?? { route, eventLoop in Self.connect(route, on: eventLoop, resolver: resolver) }
        var pools: [ObjectIdentifier: NIOLoopBoundBox<Pool>] = [:]
        for loop in group.makeIterator() {
            pools[ObjectIdentifier(loop)] = .makeBoxSendingValue(Pool(), eventLoop: loop)
        }
        self.pools = pools
    }

    struct Acquired: Sendable {
        let channel: any Channel
        let reused: Bool
    }

    /// An idle connection of `route`'s generation, or a new one; on `eventLoop`, whose pool it is.
    func acquire(_ route: ProxyRoute, on eventLoop: any EventLoop, fresh: Bool = false) -> EventLoopFuture<Acquired> {
        if !fresh, let pool = pools[ObjectIdentifier(eventLoop)]?.value {
            while let connection = pool.idle.popLast() {
                connection.handler.idle.disarm()
                if connection.channel.isActive, connection.handler.generation == route.generation {
                    return eventLoop.makeSucceededFuture(Acquired(channel: connection.channel, reused: true))
                }
                connection.channel.close(promise: nil)
            }
        }
        return connector(route, eventLoop)
    }

    /// Back into the pool, for the next request on this loop; closed when the pool is full, when
    /// it idles too long, or when the upstream closes it.
    func release(_ connection: UpstreamConnection, on eventLoop: any EventLoop) {
        connection.handler.delegate = nil
        guard connection.channel.isActive, connection.handler.reusable, let pool = pools[ObjectIdentifier(eventLoop)]?.value,
            pool.idle.count < Self.maximumIdlePerLoop
        else {
            connection.channel.close(promise: nil)
            return
        }
        let channel = connection.channel
        connection.handler.idle.move(to: eventLoop.now + Self.idleTimeout, on: eventLoop, expired: { channel.close(promise: nil) })
        pool.idle.append(connection)
    }

    /// Closes every idle connection (stop, or a route that changed).
    func closeIdle() {
        for (_, pool) in pools {
            pool.eventLoop.execute {
                for connection in pool.value.idle {
                    connection.handler.idle.cancel()
                    connection.channel.close(promise: nil)
                }
                pool.value.idle.removeAll()
            }
        }
    }

    private static func connect(_ route: ProxyRoute, on eventLoop: any EventLoop, resolver: UpstreamResolver) -> EventLoopFuture<Acquired> {
        let upstream = route.settings.upstream
        let generation = route.generation
        let tls = route.tls
        let timeout = TimeAmount(route.settings.upstreamTimeout)
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            // At TCP's level: `.socketOption(.tcp_nodelay)` would be SOL_SOCKET's option 1, SO_DEBUG,
            // which needs CAP_NET_ADMIN and failed every connect under the unit's sandbox.
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: ProxyBuffers.readSizes)
            .channelOption(.writeBufferWaterMark, value: ProxyBuffers.pendingWrites)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls {
                        // SNI names a host, never an address.
                        let name = WAFHost.isIPLiteral(upstream.host) ? nil : upstream.host
                        try pipeline.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: name))
                    }
                    try pipeline.addHandler(UpstreamHandler(generation: generation))
                }
            }
        // An address needs no lookup: nothing runs off the loop, and nothing outlives a stop.
        let connected =
            if let address = try? SocketAddress(ipAddress: upstream.host, port: upstream.port) {
                bootstrap.connect(to: address)
            } else {
                bootstrap.resolver(resolver.query(on: eventLoop)).connect(host: upstream.host, port: upstream.port)
            }
        return connected.map { channel in Acquired(channel: channel, reused: false) }
    }

    final class Pool {
        var idle: [UpstreamConnection] = []
    }
}
