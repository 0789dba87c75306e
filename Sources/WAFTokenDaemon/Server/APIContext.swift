import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import WAFTokenCore

/// What every connection's handlers share: the providers, the reloadable settings, metrics, the
/// event streams, and the generation of the providers' snapshots that cached answers are built on.
final class APIContext: ConnectionGuardContext {
    typealias Settings = ConnectionSettings

    struct Info: Sendable {
        var version: String
        var socketPath: String
        var demo: Bool
        var pid: Int32
    }

    let providers: ProviderSet
    let metrics: DaemonMetrics
    let events: EventBroadcaster
    let logger: Logger
    let info: Info
    let started = ContinuousClock.now
    private let current: NIOLockedValueBox<Settings>
    /// The fast path rebuilds its cached answer when this moves.
    let generation: SnapshotGeneration
    let shuttingDown = Atomic<Bool>(false)
    /// Answers and events from outside the socket's loops go through it (see `LoopGate`).
    let loopGate = LoopGate()
    /// Requests answered, for the status counters.
    let requestsServed = Atomic<Int>(0)
    let openConnections = Atomic<Int>(0)

    init(
        providers: ProviderSet, settings: Settings, metrics: DaemonMetrics, events: EventBroadcaster, generation: SnapshotGeneration,
        info: Info, logger: Logger
    ) {
        self.providers = providers
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

    var connectionSettings: ConnectionSettings { settings }
    var listenerName: String { "socket" }
}

extension ConnectionSettings {
    /// The API socket's: `socket.allowedUsers`, `socket.allowedGroups` and its timeouts.
    init(_ configuration: DaemonConfiguration, logger: Logger) {
        self.init(
            policy: AccessPolicy(
                allowedUsers: configuration[Keys.socketAllowedUsers], allowedGroups: configuration[Keys.socketAllowedGroups], logger: logger),
            idleTimeout: .seconds(Int64(configuration[Keys.socketIdleTimeoutSec])),
            requestTimeout: .seconds(Int64(configuration[Keys.socketRequestTimeoutSec])))
    }
}
