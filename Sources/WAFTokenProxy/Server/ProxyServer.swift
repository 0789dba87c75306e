import Logging
import NIOCore
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

/// The token-injecting proxy on one listening address: each connection gets the socket API's
/// guard (peer check, timeouts), then a `ProxyHandler`, which reads and relays HTTP itself and
/// keeps its own backpressure both ways (NIO's `BackPressureHandler` in front of it only cost a
/// pipeline step per event: 3-5% of the proxy's CPU).
final class ProxyServer: Sendable {
    let context: ProxyContext
    let settings: ProxySettings
    private let listener: Listener

    init(
        entry: ProviderEntry, settings: ProxySettings, connection: ConnectionSettings, metrics: any ProxyMetrics, budget: MemoryBudget,
        logger: Logger, resolver: UpstreamResolver = UpstreamResolver()
    ) throws(ProxyFailure) {
        let gate = LoopGate()
        let listener = Listener(name: "proxy", threads: settings.threads, gate: gate, logger: logger)
        self.settings = settings
        do {
            context = try ProxyContext(
                entry: entry, settings: settings, connection: connection, group: listener.eventLoops, loopGate: gate, metrics: metrics,
                logger: logger, budget: budget, resolver: resolver)
        } catch {
            // Its threads would outlive it: a reload refused for a bad CA file leaks none.
            listener.discard()
            throw error
        }
        self.listener = listener
    }

    /// Starts serving: on `inherited` when the service manager passed the listening socket; not
    /// `accepting`, bound only until `startAccepting()`.
    func start(inherited: CInt? = nil, accepting: Bool = true) async throws(ProxyFailure) {
        let peer: PeerCredentialsSource = if case .unix = settings.listen { .socket } else { LoopbackPeer.source }
        let address = inherited.map { .inherited($0) } ?? settings.listen.listenerAddress(mode: settings.mode)
        do {
            try await listener.start(address, accepting: accepting) { [context] channel in
                try Self.configure(channel, proxy: context, peer: peer)
            }
        } catch {
            throw .listener(error)
        }
    }

    func startAccepting() { listener.startAccepting() }

    /// Where it listens as bound (a loopback port 0 becomes the port the system chose).
    var address: String {
        guard case .loopback(let host, _) = settings.listen, let port = listener.localAddress?.port else { return settings.listen.description }
        return ListenAddress.loopback(host: host, port: port).description
    }

    func stop(grace: Duration) async {
        context.shuttingDown.store(true, ordering: .relaxed)
        // Idle upstream connections go now, while their loops run; those that requests in flight
        // give back later close with the loops.
        context.pools.closeIdle()
        // Host-name lookups not answered yet fail while the loops still run (issue 36).
        await listener.stop(grace: grace) { [resolver = context.pools.resolver] in resolver.stop() }
    }

    static func configure(_ channel: any Channel, proxy: ProxyContext, peer: PeerCredentialsSource) throws {
        if let options = channel.syncOptions {
            try options.setOption(.recvAllocator, value: ProxyBuffers.readSizes)
            // NIO keeps a read buffer per read it may make in one go (4 by default): one is enough
            // for a request and its answer, and costs a quarter of the memory per connection.
            try options.setOption(.maxMessagesPerRead, value: 1)
            try options.setOption(.writeBufferWaterMark, value: ProxyBuffers.pendingWrites)
        }
        let pipeline = channel.pipeline.syncOperations
        let connection = ConnectionState()
        try pipeline.addHandler(ConnectionGuardHandler(owner: proxy, connection: connection, peer: peer))
        try pipeline.addHandler(ProxyHandler(proxy: proxy, connection: connection))
    }
}

extension ListenAddress {
    /// Where a listener binds for this address (a Unix socket with `mode`).
    package func listenerAddress(mode: UInt16) -> Listener.Address {
        switch self {
        case .unix(let path): .unix(path: path, mode: mode)
        case .loopback(let host, let port): .tcp(host: host, port: port)
        }
    }
}
