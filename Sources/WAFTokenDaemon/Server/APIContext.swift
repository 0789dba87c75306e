import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import WAFTokenCore

/// What every connection's handlers share: the provider, the reloadable settings, metrics, the
/// event streams, and the generation of the provider's snapshot that cached answers are built on.
final class APIContext: Sendable {
    struct Settings: Sendable {
        var policy: AccessPolicy
        var idleTimeout: TimeAmount
        var requestTimeout: TimeAmount

        init(policy: AccessPolicy, idleTimeout: TimeAmount, requestTimeout: TimeAmount) {
            self.policy = policy
            self.idleTimeout = idleTimeout
            self.requestTimeout = requestTimeout
        }

        init(_ configuration: DaemonConfiguration, logger: Logger) {
            policy = AccessPolicy(
                allowedUsers: configuration[Keys.socketAllowedUsers], allowedGroups: configuration[Keys.socketAllowedGroups], logger: logger)
            idleTimeout = .seconds(Int64(configuration[Keys.socketIdleTimeoutSec]))
            requestTimeout = .seconds(Int64(configuration[Keys.socketRequestTimeoutSec]))
        }
    }

    struct Info: Sendable {
        var version: String
        var socketPath: String
        var demo: Bool
        var pid: Int32
    }

    let provider: WAFTokenProvider
    let metrics: DaemonMetrics
    let events: EventBroadcaster
    let logger: Logger
    let info: Info
    let started = ContinuousClock.now
    private let current: NIOLockedValueBox<Settings>
    /// The fast path rebuilds its cached answer when this moves.
    let generation: SnapshotGeneration
    let shuttingDown = Atomic<Bool>(false)
    /// Requests answered, for the status counters.
    let requestsServed = Atomic<Int>(0)
    let openConnections = Atomic<Int>(0)

    init(
        provider: WAFTokenProvider, settings: Settings, metrics: DaemonMetrics, events: EventBroadcaster, generation: SnapshotGeneration,
        info: Info, logger: Logger
    ) {
        self.provider = provider
        self.generation = generation
        current = NIOLockedValueBox(settings)
        self.metrics = metrics
        self.events = events
        self.info = info
        self.logger = logger
    }

    var settings: Settings {
        get { current.withLockedValue { $0 } }
        set { current.withLockedValue { $0 = newValue } }
    }
}
