// What the daemon and a service manager say to each other, below both: the daemon
// (WAFTokenDaemon) calls these, a plug-in (WAFSystemd) implements them, and the executable joins
// the two. Nothing of ours below it.

/// What the daemon tells its service manager (sd_notify under systemd). The daemon calls these at
/// the right moments; an implementation decides where they go.
public protocol ServiceNotifier: Sendable {
    /// Start-up or a reload is complete (`READY=1`).
    func ready()
    /// A reload begins (`RELOADING=1` with `MONOTONIC_USEC=`).
    func reloading()
    /// A graceful stop begins (`STOPPING=1`).
    func stopping()
    /// One human line on the current state (`STATUS=`).
    func status(_ line: String)
    /// Start-up needs longer than the service manager's timeout (`EXTEND_TIMEOUT_USEC=`).
    func extendTimeout(by duration: Duration)
    /// The daemon is about to exit with an error (`ERRNO=`, `STATUS=`).
    func failing(_ message: String, errno: Int32?)
    /// How often to ping the watchdog, or nil when there is none.
    var watchdogInterval: Duration? { get }
    /// "Still alive" (`WATCHDOG=1`).
    func watchdogPing()
}

/// No service manager: every call is a no-op.
public struct NoServiceNotifier: ServiceNotifier {
    public init() {}
    public func ready() {}
    public func reloading() {}
    public func stopping() {}
    public func status(_ line: String) {}
    public func extendTimeout(by duration: Duration) {}
    public func failing(_ message: String, errno: Int32?) {}
    public var watchdogInterval: Duration? { nil }
    public func watchdogPing() {}
}

/// A listening socket the service manager passed, with the name its unit gave it
/// (`FileDescriptorName=`; systemd's default is the socket unit's name).
public struct InheritedListener: Sendable, Equatable {
    public let descriptor: CInt
    public let name: String

    public init(descriptor: CInt, name: String) {
        self.descriptor = descriptor
        self.name = name
    }
}

/// The listening sockets a service manager passed at start.
public enum PassedSockets: Sendable, Equatable {
    /// None passed.
    case none
    case sockets([InheritedListener])
    /// Sockets were passed, but none is a listening stream socket.
    case unusable(String)
}

/// Reloads a unit of the service manager (systemd's `ReloadUnit` over D-Bus): the `reload: UNIT`
/// delivery action. The plug-in implements it; without one, every reload fails, saying why.
public protocol UnitReloader: Sendable {
    func reload(unit: String) throws(UnitReloadFailure)
}

/// Why a unit was not reloaded, in one sentence.
public struct UnitReloadFailure: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// No service manager to ask.
public struct NoUnitReloader: UnitReloader {
    public init() {}

    public func reload(unit: String) throws(UnitReloadFailure) {
        throw UnitReloadFailure("no service manager to reload \(unit) with (this build has no systemd plug-in)")
    }
}
