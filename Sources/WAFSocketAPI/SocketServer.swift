import NIOCore
import WAFDaemonTransport

/// The socket API's server: HTTP/1.1 on a Unix socket, with SwiftNIO. Every connection gets its
/// guard, codec and API handler (`SocketPipeline`).
package final class SocketServer: Sendable {
    package let api: APIContext
    package let path: String
    package let mode: UInt16
    /// On the socket's own event loops (`socket.threads`): one serves 100k requests a second and,
    /// on a small machine, leaves a core to the clients.
    private let listener: Listener

    package init(api: APIContext, path: String, mode: UInt16, threads: Int) {
        self.api = api
        self.path = path
        self.mode = mode
        listener = Listener(name: "socket", threads: threads, gate: api.loopGate, logger: api.logger) { [api] count in
            api.openConnections.store(count, ordering: .relaxed)
            api.metrics.connectionsChanged(count)
        }
    }

    /// Starts serving: on `inheritedDescriptor` when systemd passed a socket, else on `path`.
    package func start(inheritedDescriptor: CInt? = nil) async throws(ListenerFailure) {
        let address: Listener.Address = inheritedDescriptor.map { .inherited($0) } ?? .unix(path: path, mode: mode)
        try await listener.start(address) { [api] channel in try SocketPipeline.configure(channel, api: api) }
    }

    /// Stops accepting, lets the requests in flight finish within `grace`, then closes the rest.
    package func stop(grace: Duration) async {
        api.shuttingDown.store(true, ordering: .relaxed)
        await listener.stop(grace: grace)
    }

    /// Where it listens: the configured path, or the path of the socket systemd passed.
    package var listeningPath: String { listener.localAddress?.pathname ?? path }
}
