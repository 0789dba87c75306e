import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
