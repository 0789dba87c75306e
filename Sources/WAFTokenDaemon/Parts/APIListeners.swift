import Logging
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFSocketAPI

#if canImport(Glibc)
import Glibc
#endif

/// The API's listeners: the Unix socket (every endpoint), and, when configured, `metrics.listen`
/// (the probes, for Prometheus and kubelets) and `auth.listen` (forward authentication for
/// proxies that cannot reach a Unix socket). They share the providers, metrics and events; each
/// has its own role, access lists, limits and loops.
struct APIListeners: Sendable {
    let socket: SocketServer
    let probes: SocketServer?
    let auth: SocketServer?

    var all: [SocketServer] { [socket] + [probes, auth].compactMap { $0 } }

    /// The listeners `configuration` asks for, around the socket's context `api`.
    init(_ configuration: DaemonConfiguration, api: APIContext, logger: Logger) {
        socket = SocketServer(
            api: api, address: .unix(path: configuration[Keys.socketPath], mode: configuration[Keys.socketMode]),
            threads: configuration[Keys.socketThreads])
        probes = configuration[Keys.metricsListen].map { address in
            SocketServer(
                api: Self.context(like: api, role: .probes, settings: Self.probeSettings(configuration, logger: logger)),
                address: .tcp(host: address.host, port: address.port), threads: 1, peer: .network)
        }
        auth = configuration[Keys.authListen].map { address in
            SocketServer(
                api: Self.context(like: api, role: .auth, settings: Self.authSettings(configuration, logger: logger)),
                address: .tcp(host: address.host, port: address.port), threads: 1, peer: LoopbackPeer.source)
        }
    }

    /// Takes from `passed` the sockets the service manager passed for these listeners.
    func claim(_ passed: inout PassedListeners) -> [ObjectIdentifier: CInt] {
        var claimed: [ObjectIdentifier: CInt] = [:]
        claimed[ObjectIdentifier(socket)] = passed.takeAPI() ?? passed.take(socket.address)
        for server in [probes, auth].compactMap({ $0 }) { claimed[ObjectIdentifier(server)] = passed.take(server.address) }
        return claimed
    }

    /// Binds them all, each on the socket the service manager passed for it, if any. One that
    /// cannot be bound stops those bound before it.
    func start(inherited: [ObjectIdentifier: CInt]) async throws(DaemonFailure) {
        var started: [SocketServer] = []
        do throws(ListenerFailure) {
            for server in all {
                try await server.start(inherited: inherited[ObjectIdentifier(server)])
                started.append(server)
            }
        } catch {
            for server in started { await server.stop(grace: .zero) }
            throw DaemonFailure(error)
        }
    }

    /// A reload's new lists and timeouts. The addresses change at the next start only, so a
    /// listener the new configuration moves or removes runs on where it is: it keeps the lists it
    /// was started with, never the new configuration's, which do not describe it (a dropped
    /// `auth:` block once opened `auth.listen` to every uid; TENANT-11).
    func reconfigure(_ configuration: DaemonConfiguration, logger: Logger) {
        let options = APIContext.Options(
            lifecycleAccess: .lifecycle(configuration, logger: logger), authTokenWait: .seconds(Int64(configuration[Keys.authTokenWaitSec])),
            selectByForwardedHost: configuration[Keys.authSelectByForwardedHost])
        let socketAddress = Listener.Address.unix(path: configuration[Keys.socketPath], mode: 0)
        Self.reconfigure(socket, ConnectionSettings(configuration, logger: logger), stays: socketAddress, logger: logger)
        probes?.api.settings = Self.probeSettings(configuration, logger: logger)
        if let auth {
            let address = configuration[Keys.authListen].map { Listener.Address.tcp(host: $0.host, port: $0.port) }
            Self.reconfigure(auth, Self.authSettings(configuration, logger: logger), stays: address, logger: logger)
        }
        for server in all { server.api.endpointOptions = options }
    }

    /// `server` takes `settings`, with its old lists unless the new configuration still puts it
    /// at the address it listens on.
    private static func reconfigure(_ server: SocketServer, _ settings: ConnectionSettings, stays address: Listener.Address?, logger: Logger) {
        var settings = settings
        if address.map(server.address.sameEndpoint) != true {
            settings.policy = server.api.settings.policy
            logger.notice(
                "\(server.api.listenerName) keeps the lists it started with until the next start: the new configuration moves or removes it",
                metadata: ["listening": "\(server.listening)"])
        }
        server.api.settings = settings
    }

    func stop(grace: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            for server in all { group.addTask { await server.stop(grace: grace) } }
        }
    }

    private static func context(like api: APIContext, role: APIRole, settings: ConnectionSettings) -> APIContext {
        APIContext(
            providers: api.providers, settings: settings, metrics: api.metrics, events: api.events, generation: api.generation, info: api.info,
            role: role, logger: api.logger)
    }

    /// Nothing secret is served there: no lists, the socket's timeouts and limits.
    private static func probeSettings(_ configuration: DaemonConfiguration, logger: Logger) -> ConnectionSettings {
        var settings = ConnectionSettings(configuration, logger: logger)
        settings.policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: logger)
        return settings
    }

    /// `auth.allowedUsers`/`auth.allowedGroups` (the configuration requires one), the socket's
    /// timeouts and limits.
    private static func authSettings(_ configuration: DaemonConfiguration, logger: Logger) -> ConnectionSettings {
        var settings = ConnectionSettings(configuration, logger: logger)
        settings.policy = AccessPolicy(
            allowedUsers: configuration[Keys.authAllowedUsers], allowedGroups: configuration[Keys.authAllowedGroups], keyPrefix: "auth", tcp: true,
            logger: logger)
        return settings
    }
}
