import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket and its connections, for the API socket, `auth.listen` and `metrics.listen`
/// (the proxy has loops of its own, `WAFProxyLoop`): it binds a
/// Unix socket path (replacing a stale socket file, refusing to steal a live one), a loopback
/// address, or a socket systemd passed; stops accepting at the descriptor limit instead of spinning
/// (`AcceptLimitHandler`); and stops gracefully: no new connections, the requests in flight
/// answered within a bound, then everything closed.
package final class Listener: Sendable {
    private struct State {
        var channel: (any Channel)?
        var limiter: NIOLoopBound<AcceptLimitHandler>?
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The path was created here and is removed on stop; an inherited socket is not.
        var ownedPath: String?
        /// Once a stop began: told to a connection accepted after it, too.
        var stopping: ServerShutdownEvent?
    }

    private let state = NIOLockedValueBox(State())
    private let group: MultiThreadedEventLoopGroup
    private let connectionsChanged: @Sendable (Int) -> Void
    private let gate: LoopGate
    private let name: String
    private let logger: Logger

    package init(name: String, threads: Int, gate: LoopGate, logger: Logger, connectionsChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        self.name = name
        self.gate = gate
        self.logger = logger
        self.connectionsChanged = connectionsChanged
    }

    /// Where to listen.
    package enum Address: Sendable {
        /// A Unix socket path, created with `mode`.
        case unix(path: String, mode: UInt16)
        /// A TCP address (the daemon's configuration allows loopback only).
        case tcp(host: String, port: Int)
        /// A listening socket the service manager passed.
        case inherited(CInt)
    }

    /// Binds `address`; every accepted connection gets `configure` (on its event loop).
    package func start(
        _ address: Address, configure: @escaping @Sendable (any Channel) throws -> Void
    ) async throws(ListenerFailure) {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let limiter = AcceptLimitHandler(listener: name, logger: logger)
                    try channel.pipeline.syncOperations.addHandler(limiter)
                    let bound = NIOLoopBound(limiter, eventLoop: channel.eventLoop)
                    state.withLockedValue { $0.limiter = bound }
                }
            }
            .childChannelOption(.allowRemoteHalfClosure, value: false)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try configure(channel)
                    track(channel)
                }
            }
        let channel: any Channel
        var ownedPath: String?
        do {
            switch address {
            case .inherited(let descriptor):
                channel = try await bootstrap.withBoundSocket(descriptor).get()
            case .unix(let path, let mode):
                try await SocketFile.prepare(path)
                channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
                ownedPath = path
                guard SocketFile.setMode(path, mode) else {
                    try? await channel.close()
                    throw ListenerFailure("cannot set mode 0\(String(mode, radix: 8)) on \(path): \(String(cString: strerror(errno)))")
                }
            case .tcp(let host, let port):
                channel = try await bootstrap.serverChannelOption(.socketOption(.so_reuseaddr), value: 1).bind(host: host, port: port).get()
            }
        } catch let failure as ListenerFailure {
            throw failure
        } catch {
            throw ListenerFailure("cannot bind \(address): \(error)")
        }
        state.withLockedValue {
            $0.channel = channel
            $0.ownedPath = ownedPath
        }
    }

    /// Where it listens, as bound: a path, or an address with the port (the one the system chose
    /// for port 0).
    package var localAddress: SocketAddress? { state.withLockedValue { $0.channel?.localAddress } }

    /// Stops accepting, lets the requests in flight finish within `grace`, then closes the rest.
    /// `settle` runs after every connection closed and before the loops shut down: work that
    /// would complete on them from another thread is ended there (the proxy fails the host-name
    /// lookups not answered yet).
    package func stop(grace: Duration, settle: @Sendable () async -> Void = {}) async {
        let (channel, ownedPath) = state.withLockedValue { ($0.channel, $0.ownedPath) }
        try? await channel?.close()
        if let ownedPath { unlink(ownedPath) }
        let event = ServerShutdownEvent(deadline: .now() + TimeAmount(grace))
        let open = state.withLockedValue { state in
            state.stopping = event
            return Array(state.connections.values)
        }
        for connection in open { connection.pipeline.fireUserInboundEventTriggered(event) }
        let clock = ContinuousClock()
        let deadline = clock.now + grace
        while !connections.isEmpty, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for connection in connections { try? await connection.close() }
        await settle()
        gate.close()
        try? await group.shutdownGracefully()
    }

    private var connections: [any Channel] { state.withLockedValue { Array($0.connections.values) } }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let (count, stopping) = state.withLockedValue { state in
            state.connections[id] = channel
            return (state.connections.count, state.stopping)
        }
        connectionsChanged(count)
        // Accepted just before the listener closed, configured after the stop told the others.
        if let stopping { channel.eventLoop.execute { channel.pipeline.fireUserInboundEventTriggered(stopping) } }
        channel.closeFuture.whenComplete { [state, connectionsChanged, gate] _ in
            let (count, limiter) = state.withLockedValue { state -> (Int, NIOLoopBound<AcceptLimitHandler>?) in
                state.connections[id] = nil
                return (state.connections.count, state.limiter)
            }
            connectionsChanged(count)
            // A descriptor is free: a listener at the limit may accept again at once.
            if let limiter { gate.execute(on: limiter.eventLoop) { limiter.value.descriptorsFreed() } }
        }
    }
}

extension Listener.Address: CustomStringConvertible {
    package var description: String {
        switch self {
        case .unix(let path, _): path
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .inherited(let descriptor): "the socket passed as descriptor \(descriptor)"
        }
    }
}

/// Why a listener cannot start: the socket cannot be bound or prepared (the daemon exits 71).
package struct ListenerFailure: Error, Sendable, CustomStringConvertible {
    package let message: String

    package init(_ message: String) {
        self.message = message
    }

    package var description: String { message }
}
