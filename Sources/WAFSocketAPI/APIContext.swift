import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

/// What every connection's handlers share: the providers, the reloadable settings, metrics, the
/// event streams, and the generation of the providers' snapshots that cached answers are built on.
package final class APIContext: ConnectionGuardContext {
    package typealias Settings = ConnectionSettings

    package struct Info: Sendable {
        package var version: String
        package var socketPath: String
        package var demo: Bool
        package var pid: Int32

        package init(version: String, socketPath: String, demo: Bool, pid: Int32) {
            self.version = version
            self.socketPath = socketPath
            self.demo = demo
            self.pid = pid
        }
    }

    package let providers: ProviderSet
    /// Which endpoints this listener serves.
    package let role: APIRole
    package let metrics: any APIMetrics
    /// The listener's connection counts and refusal log (TENANT-6).
    package let limits = ListenerLimits()
    package var requestCounting: any RequestCounting { metrics }
    package let events: EventBroadcaster
    package let logger: Logger
    package let info: Info
    package let started = ContinuousClock.now
    private let current: NIOLockedValueBox<Settings>
    private let options = NIOLockedValueBox(Options())

    /// What the daemon's configuration says of some endpoints, reloadable.
    package struct Options: Sendable {
        /// `lifecycle.allowedUsers`/`allowedGroups`: who may move the lifecycle besides a peer
        /// allowed for every provider; nil when neither is set.
        package var lifecycleAccess: AccessPolicy?
        /// `auth.tokenWaitSec`: how long `/v1/auth` waits for a first token.
        package var authTokenWait: TimeAmount = .seconds(5)
        /// `auth.selectByForwardedHost`: whether `X-Forwarded-Host` may choose the provider.
        package var selectByForwardedHost = false

        package init(lifecycleAccess: AccessPolicy? = nil, authTokenWait: TimeAmount = .seconds(5), selectByForwardedHost: Bool = false) {
            self.lifecycleAccess = lifecycleAccess
            self.authTokenWait = authTokenWait
            self.selectByForwardedHost = selectByForwardedHost
        }
    }
    /// The fast path rebuilds its cached answer when this moves.
    package let generation: SnapshotGeneration
    package let shuttingDown = Atomic<Bool>(false)
    /// Answers and events from outside the socket's loops go through it (see `LoopGate`).
    package let loopGate = LoopGate()
    /// Requests answered, for the status counters.
    package let requestsServed = Atomic<Int>(0)
    package let openConnections = Atomic<Int>(0)

    package init(
        providers: ProviderSet, settings: Settings, metrics: any APIMetrics, events: EventBroadcaster, generation: SnapshotGeneration,
        info: Info, role: APIRole = .socket, logger: Logger
    ) {
        self.providers = providers
        self.role = role
        self.generation = generation
        current = NIOLockedValueBox(settings)
        self.metrics = metrics
        self.events = events
        self.info = info
        self.logger = logger
    }

    package var settings: Settings {
        get { current.withLockedValue { $0 } }
        set { current.withLockedValue { $0 = newValue } }
    }

    package var connectionSettings: ConnectionSettings { settings }

    /// Whether the connection's peer may use the socket under the lists in force, decided again
    /// after a reload or anything published (TENANT-3).
    func allows(_ connection: ConnectionState) -> Bool {
        connection.allowed(under: settings.policy, generation: generation.current)
    }

    package var endpointOptions: Options {
        get { options.withLockedValue { $0 } }
        set { options.withLockedValue { $0 = newValue } }
    }

    package var lifecycleAccess: AccessPolicy? {
        get { endpointOptions.lifecycleAccess }
        set { options.withLockedValue { $0.lifecycleAccess = newValue } }
    }
    package var listenerName: String { role.listenerName }
}
