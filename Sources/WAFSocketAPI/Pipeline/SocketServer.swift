import NIOCore
import WAFDaemonTransport

/// A listener of the API: HTTP/1.1 with SwiftNIO, on the Unix socket (every endpoint), or on a
/// TCP port for the probes or forward authentication (`APIRole`). Every connection gets its
/// guard, codec and API handler (`SocketPipeline`).
package final class SocketServer: Sendable {
    package let api: APIContext
    package let address: Listener.Address
    /// On the listener's own event loops (`socket.threads` for the socket): one serves 100k
    /// requests a second and, on a small machine, leaves a core to the clients.
    private let listener: Listener
    private let peer: PeerCredentialsSource

    /// `peer` says who a connection's peer is: SO_PEERCRED on the socket, the kernel's socket
    /// diagnostics on `auth.listen`, nobody in particular on `metrics.listen`.
    package init(api: APIContext, address: Listener.Address, threads: Int, peer: PeerCredentialsSource = .socket) {
        self.api = api
        self.address = address
        self.peer = peer
        listener = Listener(name: api.listenerName, threads: threads, gate: api.loopGate, logger: api.logger) { [api] count in
            api.openConnections.store(count, ordering: .relaxed)
            if api.role == .socket { api.metrics.connectionsChanged(count) }
        }
    }

    /// Starts serving: on `inherited` when the service manager passed the listening socket, else
    /// on the address.
    package func start(inherited: CInt? = nil) async throws(ListenerFailure) {
        try await listener.start(inherited.map { .inherited($0) } ?? address) { [api, peer] channel in
            try SocketPipeline.configure(channel, api: api, peer: peer)
        }
    }

    /// Stops accepting, lets the requests in flight finish within `grace`, then closes the rest.
    package func stop(grace: Duration) async {
        api.shuttingDown.store(true, ordering: .relaxed)
        await listener.stop(grace: grace)
    }

    /// Where it listens, as bound: the path (of the socket systemd passed, too), or the address
    /// with the port the system chose for port 0.
    package var listening: String {
        guard let bound = listener.localAddress else { return address.description }
        if let path = bound.pathname { return path }
        return bound.ipAddress.map { $0.contains(":") ? "[\($0)]:\(bound.port ?? 0)" : "\($0):\(bound.port ?? 0)" } ?? address.description
    }
}
