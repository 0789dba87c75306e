import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the token canary found of one provider (docs/canary.md), for `/v1/status`, `/readyz` and
/// the proxy's evidence: written by the canary, read by the API and the proxy.
package final class CanaryBoard: Sendable {
    package enum Verdict: String, Sendable, Encodable {
        /// No answer yet (or no canary).
        case unknown
        /// The web ACL accepted the token.
        case accepted
        /// A CAPTCHA, or a challenge that a new token did not lift: the token is not accepted.
        case rejected
    }

    package struct Snapshot: Sendable, Encodable, Equatable {
        package var state: Verdict
        package var url: String
        /// `accepted`, `challenged`, `captcha` or `unreachable`.
        package var lastResult: String?
        package var lastAcceptedAt: Date?
    }

    private struct State {
        var url: String?
        var verdict = Verdict.unknown
        var lastResult: String?
        var lastAcceptedAt: Date?
        /// The token the canary saw accepted last (never shown; the proxy compares with it).
        var lastAcceptedToken: String?
        var affectsReadiness = true
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    /// The canary runs against `url` (nil: no canary; the board is cleared).
    package func configure(url: String?, affectsReadiness: Bool) {
        state.withLockedValue { state in
            if state.url != url { state = State() }
            state.url = url
            state.affectsReadiness = affectsReadiness
        }
    }

    /// A probe's answer, and the verdict it leads to.
    package func record(result: String, verdict: Verdict, token: String) {
        state.withLockedValue { state in
            state.lastResult = result
            state.verdict = verdict
            if result == "accepted" {
                state.lastAcceptedAt = Date()
                state.lastAcceptedToken = token
            }
        }
    }

    package var snapshot: Snapshot? {
        state.withLockedValue { state in
            state.url.map { Snapshot(state: state.verdict, url: $0, lastResult: state.lastResult, lastAcceptedAt: state.lastAcceptedAt) }
        }
    }

    /// Whether `/readyz` must say no for this provider: the canary rejects the token and counts.
    package var holdsReadiness: Bool {
        state.withLockedValue { $0.url != nil && $0.affectsReadiness && $0.verdict == .rejected }
    }

    /// Whether `token` is the one the canary saw accepted last (a challenge of it is news).
    package func wasAccepted(_ token: String) -> Bool {
        state.withLockedValue { $0.lastAcceptedToken == token }
    }
}
