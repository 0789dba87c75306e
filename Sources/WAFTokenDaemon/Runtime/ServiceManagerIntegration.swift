import NIOConcurrencyHelpers

/// How the daemon meets its service manager: where its notifications go, and the socket it may
/// have been handed. The executable installs systemd's before running the command; without one,
/// nothing is notified and the daemon binds its own socket.
public struct ServiceManagerIntegration: Sendable {
    public var makeNotifier: @Sendable () -> any ServiceNotifier
    /// The listening socket passed by the service manager, nil when none; a failure when sockets
    /// were passed but none can be served.
    public var inheritedSocket: @Sendable () -> Result<CInt?, DaemonFailure>

    public init(
        makeNotifier: @escaping @Sendable () -> any ServiceNotifier,
        inheritedSocket: @escaping @Sendable () -> Result<CInt?, DaemonFailure>
    ) {
        self.makeNotifier = makeNotifier
        self.inheritedSocket = inheritedSocket
    }

    public static let none = ServiceManagerIntegration(makeNotifier: { NoServiceNotifier() }, inheritedSocket: { .success(nil) })

    private static let installed = NIOLockedValueBox(ServiceManagerIntegration.none)

    public static var current: ServiceManagerIntegration { installed.withLockedValue { $0 } }

    public static func install(_ integration: ServiceManagerIntegration) {
        installed.withLockedValue { $0 = integration }
    }
}
