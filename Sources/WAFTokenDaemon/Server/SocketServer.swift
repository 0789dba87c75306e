import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// The socket API's server: HTTP/1.1 on a Unix socket, with SwiftNIO.
///
/// It binds the configured path (replacing a stale socket file, refusing to steal a live one) or
/// serves a socket systemd passed (socket activation), gives every connection its guard, codec and
/// API handler, and stops gracefully: no new connections, the requests in flight answered within
/// a bound, then everything closed.
final class SocketServer: Sendable {
    private struct State {
        var listener: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The path was created here and is removed on stop; an inherited socket is not.
        var ownsPath = false
    }

    let api: APIContext
    let path: String
    let mode: UInt16
    private let state = NIOLockedValueBox(State())
    /// The socket's own event loops (`socket.threads`): one serves 100k requests a second and,
    /// on a small machine, leaves a core to the clients.
    private let group: MultiThreadedEventLoopGroup

    init(api: APIContext, path: String, mode: UInt16, threads: Int) {
        self.api = api
        self.path = path
        self.mode = mode
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Starts serving: on `inheritedDescriptor` when systemd passed a socket, else on `path`.
    func start(inheritedDescriptor: CInt? = nil) async throws(DaemonFailure) {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
            .childChannelInitializer { [api] channel in
                channel.eventLoop.makeCompletedFuture {
                    try SocketPipeline.configure(channel, api: api)
                }.flatMap { [self] in
                    track(channel)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
            }
        do {
            let listener: any Channel
            if let descriptor = inheritedDescriptor {
                listener = try await bootstrap.withBoundSocket(descriptor).get()
            } else {
                try await SocketFile.prepare(path)
                listener = try await bootstrap.bind(unixDomainSocketPath: path).get()
                guard chmod(path, mode_t(mode)) == 0 else {
                    throw DaemonFailure(.osError, "cannot set mode 0\(String(mode, radix: 8)) on \(path): \(String(cString: strerror(errno)))")
                }
            }
            state.withLockedValue {
                $0.listener = listener
                $0.ownsPath = inheritedDescriptor == nil
            }
        } catch let failure as DaemonFailure {
            throw failure
        } catch {
            throw DaemonFailure(.osError, "cannot bind the socket \(path): \(error)")
        }
    }

    /// Stops accepting, lets the requests in flight finish within `grace`, then closes the rest.
    func stop(grace: Duration) async {
        api.shuttingDown.store(true, ordering: .relaxed)
        let (listener, ownsPath) = state.withLockedValue { ($0.listener, $0.ownsPath) }
        try? await listener?.close()
        if ownsPath { unlink(path) }
        for channel in connections { channel.pipeline.fireUserInboundEventTriggered(ServerShutdownEvent()) }
        let clock = ContinuousClock()
        let deadline = clock.now + grace
        while !connections.isEmpty, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in connections { try? await channel.close() }
        try? await group.shutdownGracefully()
    }

    /// Where it listens: the configured path, or the path of the socket systemd passed.
    var listeningPath: String {
        state.withLockedValue { $0.listener?.localAddress?.pathname } ?? path
    }

    private var connections: [any Channel] { state.withLockedValue { Array($0.connections.values) } }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let count = state.withLockedValue { state -> Int in
            state.connections[id] = channel
            return state.connections.count
        }
        api.openConnections.store(count, ordering: .relaxed)
        api.metrics.connections.record(count)
        channel.closeFuture.whenComplete { [state, api] _ in
            let count = state.withLockedValue { state -> Int in
                state.connections[id] = nil
                return state.connections.count
            }
            api.openConnections.store(count, ordering: .relaxed)
            api.metrics.connections.record(count)
        }
    }
}
