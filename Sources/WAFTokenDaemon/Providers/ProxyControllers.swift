import Logging
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFTokenProxy

/// Each provider's proxy controller, by provider name: the listeners see providers through the
/// registry, which knows nothing of proxies; the daemon starts, reloads and stops them through these.
final class ProxyControllers: Sendable {
    private let controllers = NIOLockedValueBox<[String: ProxyController]>([:])
    private let stopped = NIOLockedValueBox(false)

    subscript(name: String) -> ProxyController? {
        controllers.withLockedValue { $0[name] }
    }

    var all: [ProxyController] { controllers.withLockedValue { Array($0.values) } }

    func insert(_ controller: ProxyController, for name: String) {
        let late = controllers.withLockedValue { state in
            state[name] = controller
            return stopped.withLockedValue { $0 }
        }
        // A reload that outlived the stop's wait for it: what it adds stops at once.
        if late { Task { await controller.stop() } }
    }

    @discardableResult
    func remove(_ name: String) -> ProxyController? {
        controllers.withLockedValue { $0.removeValue(forKey: name) }
    }

    /// Starts the proxy of `provider`, if its configuration has one: its settings as
    /// `configuration` gives them, its connections limited as the socket's.
    func apply(
        _ provider: ProviderConfiguration, _ configuration: DaemonConfiguration, socket: ConnectionSettings, logger: Logger,
        inherited: CInt? = nil
    ) async throws(DaemonFailure) {
        guard let controller = self[provider.name] else { return }
        let change = try await Self.prepare(controller, provider, configuration, socket: socket, logger: logger, inherited: inherited)
        await controller.commit(change).stop()
    }

    /// A reload's change of `controller`, the proxy of `provider`, made ready (`ProxyController.prepare`).
    static func prepare(
        _ controller: ProxyController, _ provider: ProviderConfiguration, _ configuration: DaemonConfiguration, socket: ConnectionSettings,
        logger: Logger, inherited: CInt? = nil
    ) async throws(DaemonFailure) -> ProxyController.Change {
        // The upstream through the provider's egress (EGRESS-1).
        let route = try ProxyConfiguration(provider, configuration).map { proxy throws(DaemonFailure) in
            try OutboundRoute.of(provider, to: proxy.upstream.url, in: configuration)
        }
        let settings = ProxySettings(provider, configuration, route: route ?? .direct)
        let connection = ProxyConfiguration(provider, configuration).map { ConnectionSettings(proxy: $0, socket: socket, logger: logger) } ?? socket
        do throws(ProxyFailure) {
            return try await controller.prepare(settings, connection: connection, inherited: inherited)
        } catch {
            throw DaemonFailure(error)
        }
    }

    /// Stops every proxy, together; one inserted later stops at once.
    func stopAll() async {
        stopped.withLockedValue { $0 = true }
        await withTaskGroup(of: Void.self) { group in
            for controller in all { group.addTask { await controller.stop() } }
        }
    }
}
