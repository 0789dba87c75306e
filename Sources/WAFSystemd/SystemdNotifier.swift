import CSystemd
import WAFServiceManager

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's messages to systemd, through libsystemd's `sd_notify` (a no-op without
/// `NOTIFY_SOCKET`), and the watchdog interval from `sd_watchdog_enabled`.
public final class SystemdNotifier: ServiceNotifier {
    public let watchdogInterval: Duration?

    public init() {
        var microseconds: UInt64 = 0
        // Honours WATCHDOG_PID: a watchdog meant for another process is none of ours.
        if sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 {
            watchdogInterval = .microseconds(Int64(microseconds / 2))
        } else {
            watchdogInterval = nil
        }
    }

    public func ready() { notify("READY=1") }

    /// `MONOTONIC_USEC` is CLOCK_MONOTONIC, as systemd expects it with `RELOADING=1`.
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        notify("RELOADING=1\nMONOTONIC_USEC=\(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000)")
    }

    public func stopping() { notify("STOPPING=1") }

    public func status(_ line: String) { notify("STATUS=" + Self.oneLine(line)) }

    public func extendTimeout(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        notify("EXTEND_TIMEOUT_USEC=\(seconds * 1_000_000 + attoseconds / 1_000_000_000_000)")
    }

    public func failing(_ message: String, errno: Int32?) {
        notify("STATUS=" + Self.oneLine(message) + (errno.map { "\nERRNO=\($0)" } ?? ""))
    }

    public func watchdogPing() { notify("WATCHDOG=1") }

    private func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// A state line must not hold a newline: it would start another assignment.
    private static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
