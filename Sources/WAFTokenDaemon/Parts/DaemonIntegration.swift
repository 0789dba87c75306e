import NIOConcurrencyHelpers
import WAFServiceManager
import WAFTokenCore

/// What the executable plugs into the daemon, so that the library depends on none of it: the
/// service manager (systemd's notifier and passed socket), the local token service of demo mode,
/// and the watchdog's check that the provider still answers.
public struct DaemonIntegration: Sendable {
    /// "Does the provider still answer?": runs the completion once it does.
    public typealias LivenessProbe = @Sendable (@escaping @Sendable () -> Void) -> Void

    public var makeNotifier: @Sendable () -> any ServiceNotifier
    /// The listening sockets passed by the service manager.
    public var passedSockets: @Sendable () -> PassedSockets
    /// Starts the local token service for `--demo`; nil when this build has none.
    public var startDemoService: (@Sendable () async throws -> any DemoTokenService)?
    /// How the watchdog checks a provider: a round trip through its state context.
    public var livenessProbe: @Sendable (WAFTokenProvider) -> LivenessProbe
    /// The `reload: UNIT` delivery action's D-Bus call.
    public var unitReloader: any UnitReloader

    public init(
        makeNotifier: @escaping @Sendable () -> any ServiceNotifier = { NoServiceNotifier() },
        passedSockets: @escaping @Sendable () -> PassedSockets = { .none },
        startDemoService: (@Sendable () async throws -> any DemoTokenService)? = nil,
        livenessProbe: @escaping @Sendable (WAFTokenProvider) -> LivenessProbe = { provider in { provider.ping($0) } },
        unitReloader: any UnitReloader = NoUnitReloader()
    ) {
        self.makeNotifier = makeNotifier
        self.passedSockets = passedSockets
        self.startDemoService = startDemoService
        self.livenessProbe = livenessProbe
        self.unitReloader = unitReloader
    }

    private static let installed = NIOLockedValueBox(DaemonIntegration())

    public static var current: DaemonIntegration { installed.withLockedValue { $0 } }

    /// Installs `integration` for the process; `waf-tokend`'s main does this before parsing. A
    /// global, because ArgumentParser makes the command and no argument reaches it from main.
    public static func install(_ integration: DaemonIntegration) {
        installed.withLockedValue { $0 = integration }
    }
}

/// A token service running in this process for demo mode.
public protocol DemoTokenService: Sendable {
    var applicationIntegrationURL: String { get }
    func stop() async
}
