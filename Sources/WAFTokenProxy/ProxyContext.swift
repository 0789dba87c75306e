import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import WAFDaemonTransport
import WAFProviderRegistry
import WAFProxyLoop
import WAFTokenCore

/// What every proxied connection shares: the provider, the route in force (reloadable), the
/// upstream lookups, metrics and the status board.
final class ProxyContext: ConnectionGuardContext {
    typealias Route = ProxyRoute

    /// The provider whose token it adds, with its name, board and forced-refresh limit.
    let entry: ProviderEntry
    var provider: WAFTokenProvider { entry.provider }
    /// Its name, which the proxy's metrics carry.
    var providerName: String { entry.name }
    var board: ProxyBoard { entry.board }
    let metrics: any ProxyMetrics
    /// The listener's connection counts and refusal log (TENANT-6).
    package let limits = ListenerLimits()
    var requestCounting: any RequestCounting { metrics }
    let logger: Logger
    /// What the proxy's connections may keep of their peers' bytes (TENANT-12).
    let budget: MemoryBudget
    /// Host-name lookups of new upstream connections; the proxy's stop ends them (issue 36).
    let resolver: UpstreamResolver
    /// A test's scripted upstream in place of TCP.
    let connector: UpstreamPool.Connector?
    private let current: NIOLockedValueBox<Route>
    /// The generation of the route in force, stored after the route: a loop compares it with the
    /// route it holds instead of taking the lock per request (`ProxyConnection.route`).
    private let installed = Atomic<Int>(1)
    /// The last generation given to a route made.
    private let made = Atomic<Int>(1)
    let shuttingDown = Atomic<Bool>(false)
    /// This proxy's metrics, kept rather than looked up per request.
    let requestCounters: [CoreMetrics.Counter]

    init(
        entry: ProviderEntry, settings: ProxySettings, connection: ConnectionSettings, metrics: any ProxyMetrics, logger: Logger,
        budget: MemoryBudget = MemoryBudget(total: 16 << 20), connector: UpstreamPool.Connector? = nil,
        resolver: UpstreamResolver = UpstreamResolver()
    ) throws(ProxyFailure) {
        self.entry = entry
        self.budget = budget
        self.metrics = metrics
        self.logger = logger
        requestCounters = metrics.proxyRequestCounters(provider: entry.name)
        current = NIOLockedValueBox(try Self.route(settings, connection: connection, generation: 1, metrics: metrics, provider: entry.name))
        self.resolver = resolver
        self.connector = connector
    }

    var route: Route { current.withLockedValue { $0 } }

    /// `route.generation`, without the lock: a loop that sees the generation it holds holds the
    /// route in force (or the one just replaced, as a read just before the reload would have).
    var installedGeneration: Int { installed.load(ordering: .acquiring) }

    var connectionSettings: ConnectionSettings { route.connection }
    var listenerName: String { "proxy" }

    /// A reload's new settings for the same listener, as a route made ready (`install` puts it in
    /// force). Each route made gets a generation of its own, installed or not: two routes of one
    /// generation would let a loop holding the first take it for the second.
    func route(for settings: ProxySettings, connection: ConnectionSettings) throws(ProxyFailure) -> Route {
        try Self.route(
            settings, connection: connection, generation: made.add(1, ordering: .relaxed).newValue, metrics: metrics, provider: providerName)
    }

    func install(_ route: Route) {
        // Under the lock: two installs that overlapped could otherwise leave the generation of the
        // one replaced, and a connection holding it would keep it.
        current.withLockedValue {
            $0 = route
            installed.store(route.generation, ordering: .releasing)
        }
    }

    private static func route(
        _ settings: ProxySettings, connection: ConnectionSettings, generation: Int, metrics: any ProxyMetrics, provider: String
    ) throws(ProxyFailure) -> Route {
        var tls: TLSClientContext?
        if settings.upstream.secure {
            do {
                tls = try TLSClientContext(caFile: settings.caFile)
            } catch {
                throw .settings("proxy.upstream: cannot set up TLS: \(error)")
            }
        }
        let timer = metrics.upstreamTimer(provider: provider, egress: settings.forwardProxy?.label ?? "direct")
        return Route(settings: settings, connection: connection, tls: tls, generation: generation, upstreamTimer: timer)
    }

    // MARK: Tokens

    /// The token to send on `route` now, fresh or stale: only one fetched for the identity the
    /// route was made for, so a request on its way when a reload switches the identity carries
    /// the token of its route or none (TENANT-2); nil before the first.
    func token(for route: Route) -> String? {
        provider.cachedToken(for: route.settings.identity)?.token.value
    }

    /// Calls `completion` on `loop` with a first token of `route`, or with nil after `timeout`
    /// (nanoseconds). Called on `loop`.
    func waitForToken(for route: Route, timeout: UInt64, on loop: EpollLoop, _ completion: @escaping (String?) -> Void) {
        awaitToken(for: route, timeout: timeout, on: loop, completion) { self.provider.onTokenReady($0) }
    }

    /// Asks for a new token (RET-8: joining a fetch in flight) and calls `completion` on `loop`
    /// with the route's token then, or with nil when it fails or `timeout` passes first. A forced
    /// fetch at most once per `refresh.minForcedIntervalSec` (TENANT-4): inside it, nil at once.
    func refreshToken(for route: Route, timeout: UInt64, on loop: EpollLoop, _ completion: @escaping (String?) -> Void) {
        awaitToken(for: route, timeout: timeout, on: loop, completion) { callback in
            let (decision, wait) = self.entry.forcedRefresh.request(self.provider, callback)
            if decision.isLimited { callback(nil, nil) }
            return wait
        }
    }

    private func awaitToken(
        for route: Route, timeout: UInt64, on loop: EpollLoop, _ completion: @escaping (String?) -> Void,
        _ ask: (@escaping WAFTokenResultCallback) -> WAFTokenWait?
    ) {
        let answered = Once()
        let wait = NIOLockedValueBox<WAFTokenWait?>(nil)
        let timer = loop.schedule(in: timeout) {
            guard answered.claim() else { return }
            // Forgotten by the provider at once, not held until RET-3 while fetches fail (TENANT-12).
            wait.withLockedValue { $0 }?.cancel()
            completion(nil)
        }
        let bound = LoopBound(completion, on: loop)
        // After the proxy's stop, `execute` drops the answer: nothing waits for it then.
        let made = ask { token, _ in
            loop.execute {
                guard answered.claim() else { return }
                loop.cancel(timer)
                // The route's token, not the callback's: a reload may have switched the identity.
                bound.value(token == nil ? nil : self.token(for: route))
            }
        }
        wait.withLockedValue { $0 = made }
        if answered.isClaimed { made?.cancel() }
    }
}
