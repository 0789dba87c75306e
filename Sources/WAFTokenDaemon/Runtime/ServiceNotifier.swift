import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

/// The one-line summary of the providers for `STATUS=`: one provider's as
/// `token fresh (age 12s), foreground, next refresh in 288s`; several counted, with the line of
/// each that has no fresh token (the first three).
enum StatusLine {
    static func compose(_ statuses: [(name: String, status: WAFProviderStatus)], now: Date = .now) -> String {
        if statuses.count == 1, let only = statuses.first { return compose(only.status, now: now) }
        let behind = statuses.filter { $0.status.token?.stale != false }
        var line = "\(statuses.count) providers, \(statuses.count - behind.count) with a fresh token"
        let shown = behind.prefix(3).map { "\($0.name): \(compose($0.status, now: now))" }
        if !shown.isEmpty { line += "; " + shown.joined(separator: "; ") }
        if behind.count > 3 { line += "; and \(behind.count - 3) more" }
        return line
    }

    static func compose(_ status: WAFProviderStatus, now: Date = .now) -> String {
        var parts: [String] = []
        if let token = status.token {
            parts.append("token \(token.stale ? "stale" : "fresh") (age \(token.age.components.seconds)s)")
        } else {
            parts.append("no token yet")
        }
        parts.append(status.lifecycle.state.rawValue + (status.lifecycle.paused ? " (refresh paused)" : ""))
        let refresh = status.refresh
        switch refresh.state {
        case .disabled:
            parts.append("on-demand fetching")
        case .paused, .idle:
            break
        case .retrying:
            parts.append(
                "\(refresh.consecutiveFailures) failed attempt\(refresh.consecutiveFailures == 1 ? "" : "s") (\(refresh.lastError?.name ?? "error"))")
            if let next = refresh.nextAt { parts.append("next attempt in \(seconds(until: next, from: now))s") }
        case .scheduled:
            if refresh.inFlight {
                parts.append("fetching")
            } else if refresh.held {
                parts.append("refresh due on return to an active state")
            } else if let next = refresh.nextAt {
                parts.append("next refresh in \(seconds(until: next, from: now))s")
            }
        }
        return parts.joined(separator: ", ")
    }

    private static func seconds(until date: Date, from now: Date) -> Int {
        max(0, Int(date.timeIntervalSince(now).rounded(.up)))
    }
}
