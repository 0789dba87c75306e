import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Synchronization
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

/// What every proxied connection shares: the provider, the route in force (reloadable), the
/// upstream connection pools, metrics and the status board.
final class ProxyContext: ConnectionGuardContext {
    /// What one request reads once at its start, so that a reload never changes a request midway.
    struct Route: Sendable {
        let settings: ProxySettings
        let connection: ConnectionSettings
        /// For an https upstream; made once per route, not per connection.
        let tls: NIOSSLContext?
        /// Pooled connections of an older route are not reused.
        let generation: Int
    }

    let provider: WAFTokenProvider
    /// Its name, which the proxy's metrics carry.
    let providerName: String
    let metrics: any ProxyMetrics
    var requestCounting: any RequestCounting { metrics }
    let logger: Logger
    let board: ProxyBoard
    let pools: UpstreamPools
    private let current: NIOLockedValueBox<Route>
    let shuttingDown = Atomic<Bool>(false)
    /// Token answers reach the proxy's loops through it (see `LoopGate`).
    let loopGate: LoopGate
    /// This proxy's metrics, kept rather than looked up per request.
    let requestCounters: [CoreMetrics.Counter]
    let upstreamTimer: CoreMetrics.Timer

    init(
        provider: WAFTokenProvider, name: String, settings: ProxySettings, connection: ConnectionSettings, group: any EventLoopGroup,
        loopGate: LoopGate, metrics: any ProxyMetrics, board: ProxyBoard, logger: Logger
    ) throws(ProxyFailure) {
        self.provider = provider
        providerName = name
        self.loopGate = loopGate
        self.metrics = metrics
        self.board = board
        self.logger = logger
        requestCounters = metrics.proxyRequestCounters(provider: name)
        upstreamTimer = metrics.upstreamTimer(provider: name)
        current = NIOLockedValueBox(try Self.route(settings, connection: connection, generation: 1))
        pools = UpstreamPools(group: group)
    }

    var route: Route { current.withLockedValue { $0 } }

    var connectionSettings: ConnectionSettings { route.connection }
    var listenerName: String { "proxy" }

    /// A reload's new settings for the same listener.
    func update(_ settings: ProxySettings, connection: ConnectionSettings) throws(ProxyFailure) {
        let generation = route.generation + 1
        let route = try Self.route(settings, connection: connection, generation: generation)
        current.withLockedValue { $0 = route }
    }

    private static func route(_ settings: ProxySettings, connection: ConnectionSettings, generation: Int) throws(ProxyFailure) -> Route {
        var tls: NIOSSLContext?
        if settings.upstream.secure {
            do {
                var configuration = TLSConfiguration.makeClientConfiguration()
                if let caFile = settings.caFile { configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile)) }
                tls = try NIOSSLContext(configuration: configuration)
            } catch {
                throw .settings("proxy.upstream: cannot set up TLS: \(error)")
            }
        }
        return Route(settings: settings, connection: connection, tls: tls, generation: generation)
    }

    // MARK: Tokens

    /// The token to send now, fresh or stale; nil before the first.
    var currentToken: String? { provider.cachedToken()?.token.value }

    /// Calls `completion` on `eventLoop` with a first token, or with nil after `timeout`.
    func waitForToken(timeout: TimeAmount, on eventLoop: any EventLoop, _ completion: @escaping @Sendable (String?) -> Void) {
        awaitToken(timeout: timeout, on: eventLoop, completion) { self.provider.onTokenReady($0) }
    }

    /// Asks for a new token (RET-8: joining a fetch in flight) and calls `completion` on `eventLoop`
    /// with it, or with nil when it fails or `timeout` passes first.
    func refreshToken(timeout: TimeAmount, on eventLoop: any EventLoop, _ completion: @escaping @Sendable (String?) -> Void) {
        awaitToken(timeout: timeout, on: eventLoop, completion) { self.provider.refreshToken($0) }
    }

    private func awaitToken(
        timeout: TimeAmount, on eventLoop: any EventLoop, _ completion: @escaping @Sendable (String?) -> Void,
        _ ask: (@escaping WAFTokenResultCallback) -> Void
    ) {
        let answered = Once()
        let timer = eventLoop.scheduleTask(in: timeout) {
            if answered.claim() { completion(nil) }
        }
        ask { [loopGate] token, _ in
            loopGate.execute(on: eventLoop) {
                guard answered.claim() else { return }
                timer.cancel()
                completion(token?.value)
            }
        }
    }
}
