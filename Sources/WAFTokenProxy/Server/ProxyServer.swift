import Logging
import NIOConcurrencyHelpers
import NIOCore
import WAFDaemonTransport
import WAFProviderRegistry
import WAFProxyLoop
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// The token-injecting proxy on one listening address: `proxy.threads` loops of its own
/// (`WAFProxyLoop`: epoll, as nginx's workers), each accepting from the one listening socket and
/// serving what it accepted with its own upstream pool, so that a request never crosses threads.
/// Each connection is a `ProxyConnection`, its own guard and the driver of its machine.
final class ProxyServer: Sendable {
    let context: ProxyContext
    let settings: ProxySettings
    private let threads: [LoopThread]
    private let workers: [LoopBound<ProxyWorker>]
    private let open = OpenConnections()
    private struct Bound {
        var descriptor: Int32 = -1
        /// The path was created here and is removed on stop; an inherited socket is not.
        var ownedPath: String?
        var port: Int?
    }
    private let bound = NIOLockedValueBox(Bound())

    init(
        entry: ProviderEntry, settings: ProxySettings, connection: ConnectionSettings, metrics: any ProxyMetrics, budget: MemoryBudget,
        logger: Logger, resolver: UpstreamResolver = UpstreamResolver(), connector: UpstreamPool.Connector? = nil
    ) throws(ProxyFailure) {
        self.settings = settings
        context = try ProxyContext(
            entry: entry, settings: settings, connection: connection, metrics: metrics, logger: logger, budget: budget, connector: connector,
            resolver: resolver)
        var threads: [LoopThread] = []
        do {
            for index in 0..<max(1, settings.threads) { threads.append(try LoopThread(name: "waf-proxy-\(index)")) }
        } catch {
            for thread in threads { thread.stopAndJoin() }
            throw .listener(ListenerFailure("cannot start the proxy's threads: \(error)"))
        }
        let peers: PeerSource = if case .unix = settings.listen { .unixSocket } else { .loopback }
        self.threads = threads
        workers = threads.map { [context, open] thread in
            LoopBound(ProxyWorker(loop: thread.loop, proxy: context, peers: peers, open: open), on: thread.loop)
        }
    }

    /// Starts serving: on `inherited` when the service manager passed the listening socket; not
    /// `accepting`, bound only until `startAccepting()`.
    func start(inherited: CInt? = nil, accepting: Bool = true) async throws(ProxyFailure) {
        var made = Bound()
        if let inherited {
            made.descriptor = inherited
        } else {
            do {
                switch settings.listen {
                case .unix(let path):
                    try await SocketFile.prepare(path)
                    made.descriptor = try LoopListener.bind(try SocketAddress(unixDomainSocketPath: path))
                    made.ownedPath = path
                    guard SocketFile.setMode(path, settings.mode) else {
                        let reason = String(cString: strerror(errno))
                        close(made.descriptor)
                        unlink(path)
                        throw ListenerFailure("cannot set mode 0\(String(settings.mode, radix: 8)) on \(path): \(reason)")
                    }
                case .loopback(let host, let port):
                    made.descriptor = try LoopListener.bind(try SocketAddress.makeAddressResolvingHost(host, port: port))
                }
            } catch let failure as ListenerFailure {
                throw .listener(failure)
            } catch {
                throw .listener(ListenerFailure("cannot bind \(settings.listen): \(error)"))
            }
        }
        made.port = LoopListener.port(of: made.descriptor)
        bound.withLockedValue { $0 = made }
        if accepting { startAccepting() }
    }

    /// A server bound with `accepting: false` takes its connections from now on: each loop
    /// watches its own descriptor of the listening socket.
    func startAccepting() {
        let descriptor = bound.withLockedValue { $0.descriptor }
        guard descriptor >= 0 else { return }
        for worker in workers {
            let own = dup(descriptor)
            worker.loop.execute {
                do {
                    try worker.value.listen(on: own)
                } catch {
                    close(own)
                    worker.value.proxy.logger.error("proxy: cannot accept connections on a loop: \(error)")
                }
            }
        }
    }

    /// Where it listens as bound (a loopback port 0 becomes the port the system chose).
    var address: String {
        guard case .loopback(let host, _) = settings.listen, let port = bound.withLockedValue({ $0.port }) else { return settings.listen.description }
        return ProxySettings.Listen.loopback(host: host, port: port).description
    }

    /// Closes every idle upstream connection (the upstream changed).
    func closeIdle() {
        for worker in workers { worker.loop.execute { worker.value.pool.closeIdle() } }
    }

    /// Stops accepting, lets the requests in flight finish within `grace`, then closes the rest
    /// and ends the loops. Host-name lookups not answered yet fail while the loops still run
    /// (issue 36).
    func stop(grace: Duration) async {
        context.shuttingDown.store(true, ordering: .relaxed)
        let deadline = EpollLoop.now &+ grace.loopNanoseconds
        for worker in workers { worker.loop.execute { worker.value.stopBegan(deadline: deadline) } }
        let (descriptor, ownedPath) = bound.withLockedValue { bound in
            defer { bound.descriptor = -1 }
            return (bound.descriptor, bound.ownedPath)
        }
        if descriptor >= 0 { close(descriptor) }
        if let ownedPath { unlink(ownedPath) }
        while open.count.load(ordering: .relaxed) > 0, EpollLoop.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // The lookups first: one answered after the pools were emptied would open a connection
        // that nothing closes on the loop.
        context.resolver.stop()
        for worker in workers { worker.loop.execute { worker.value.closeAll() } }
        for thread in threads { thread.stopAndJoin() }
    }
}

extension ProxySettings.Listen {
    /// Where a listener binds for this address (a Unix socket with `mode`).
    package func listenerAddress(mode: UInt16) -> Listener.Address {
        switch self {
        case .unix(let path): .unix(path: path, mode: mode)
        case .loopback(let host, let port): .tcp(host: host, port: port)
        }
    }
}
