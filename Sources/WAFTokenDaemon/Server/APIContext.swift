import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization
import WAFTokenCore

/// What every connection's handlers share: the provider, the reloadable settings, metrics, the
/// event streams, and a generation number that moves on every provider event so that cached
/// answers know when they are out of date.
final class APIContext: Sendable {
    struct Settings: Sendable {
        var policy: AccessPolicy
        var idleTimeout: TimeAmount
        var requestTimeout: TimeAmount
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
    /// Moves on every provider event: the fast path rebuilds its cached answer when it changes.
    let generation = Atomic<UInt64>(0)
    let shuttingDown = Atomic<Bool>(false)
    /// Requests answered, for the status counters.
    let requestsServed = Atomic<Int>(0)
    let openConnections = Atomic<Int>(0)

    init(provider: WAFTokenProvider, settings: Settings, metrics: DaemonMetrics, events: EventBroadcaster, info: Info, logger: Logger) {
        self.provider = provider
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

    func providerChanged() {
        generation.add(1, ordering: .relaxed)
    }
}

/// One connection's facts, shared by its handlers on its event loop.
final class ConnectionState {
    /// nil until SO_PEERCRED was read; a connection's requests wait for it.
    var peer: PeerCredentials?
    var allowed = false
}

/// What the API handler tells the connection's guard about a request, outbound.
enum ConnectionEvent: Sendable {
    /// A request head arrived: the request is being served, no timeout applies.
    case requestStarted
    /// The answer is complete; idle time starts (or the connection closes).
    case responseFinished
}
