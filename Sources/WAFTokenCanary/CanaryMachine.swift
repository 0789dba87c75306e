/// The token canary's decisions for one provider, as a value (docs/canary.md): what an answer of
/// the protected API leads to. No I/O, no clock: the service asks at the times it is told.
///
/// Accepted: the next probe after `interval`. Challenged: one forced refresh, then a probe at once
/// with the new token. A CAPTCHA, or a challenge again after a new token: rejected, and the next
/// probes follow the provider's retry back-off (RET-1…2) until an answer is accepted again.
/// Unreachable tells nothing of the token: the verdict stays, and the back-off applies. One forced
/// refresh per rejection episode (CANARY-7): from the first answer that is not accepted to the
/// next accepted one, a challenge forces no further refresh, so a web ACL that refuses every token
/// costs one fetch, not one per probe (nor every hook and restarted child that a new token sets off).
public struct CanaryMachine: Sendable {
    public enum Result: String, Sendable, CaseIterable {
        case accepted, challenged, captcha, unreachable
    }

    public enum Verdict: String, Sendable {
        case unknown, accepted, rejected
    }

    public struct Settings: Sendable, Equatable {
        public var interval: Duration
        public var maxRetryCount: Int
        public var maxErrorDelay: Duration

        public init(interval: Duration, maxRetryCount: Int, maxErrorDelay: Duration) {
            self.interval = interval
            self.maxRetryCount = maxRetryCount
            self.maxErrorDelay = maxErrorDelay
        }
    }

    public enum Action: Sendable, Equatable {
        /// Ask the protected API with `token`.
        case probe(token: String)
        /// One forced refresh (`refresh.minForcedIntervalSec` applies); `refreshed` follows.
        case forceRefresh
        /// `due` after this long.
        case arm(after: Duration)
        /// The verdict moved (an event, the status, readiness).
        case verdict(Verdict)
    }

    enum Phase: Sendable, Equatable {
        case waiting
        /// A probe with `token` is out; `afterRefresh`: its token came from a refresh a challenge asked for.
        case probing(token: String, afterRefresh: Bool)
        /// `challenged` was the token's answer; a new token is being asked for.
        case refreshing(challenged: String)
    }

    public var settings: Settings
    private(set) var phase = Phase.waiting
    public private(set) var verdict = Verdict.unknown
    /// Probes in a row that were not accepted: the back-off's count.
    private(set) var failures = 0
    /// The episode of answers that were not accepted has had its forced refresh (until an answer
    /// is accepted again).
    public private(set) var refreshedThisEpisode = false

    public init(settings: Settings) {
        self.settings = settings
    }

    /// How soon to look again when there is no token yet: the first probe follows the first token.
    public static let firstTokenPoll = Duration.seconds(1)

    /// The time for a probe came; `token` is the provider's now (nil: none yet).
    public mutating func due(token: String?) -> [Action] {
        guard phase == .waiting else { return [] }
        guard let token else { return [.arm(after: Self.firstTokenPoll)] }
        phase = .probing(token: token, afterRefresh: false)
        return [.probe(token: token)]
    }

    /// The probe's answer.
    public mutating func answered(_ result: Result) -> [Action] {
        guard case .probing(let token, let afterRefresh) = phase else { preconditionFailure("an answer without a probe: \(phase)") }
        switch result {
        case .accepted:
            phase = .waiting
            failures = 0
            refreshedThisEpisode = false
            return move(to: .accepted) + [.arm(after: settings.interval)]
        case .challenged where !afterRefresh && !refreshedThisEpisode:
            phase = .refreshing(challenged: token)
            refreshedThisEpisode = true
            return [.forceRefresh]
        case .challenged, .captcha:
            return rejected()
        case .unreachable:
            phase = .waiting
            failures += 1
            return [.arm(after: backoff())]
        }
    }

    /// The forced refresh ended; `token` is the provider's token now (nil: none).
    public mutating func refreshed(token: String?) -> [Action] {
        guard case .refreshing(let challenged) = phase else { preconditionFailure("a refresh ended while none was asked for: \(phase)") }
        guard let token, token != challenged else {
            // No new token to try: the challenge stands.
            phase = .probing(token: challenged, afterRefresh: true)
            return rejected()
        }
        phase = .probing(token: token, afterRefresh: true)
        return [.probe(token: token)]
    }

    private mutating func rejected() -> [Action] {
        phase = .waiting
        failures += 1
        return move(to: .rejected) + [.arm(after: backoff())]
    }

    private mutating func move(to new: Verdict) -> [Action] {
        guard new != verdict else { return [] }
        verdict = new
        return [.verdict(new)]
    }

    /// RET-1's wait for the `failures`th probe in a row that was not accepted, RET-2's after
    /// `maxRetryCount` of them.
    func backoff() -> Duration {
        guard failures <= settings.maxRetryCount else { return settings.maxErrorDelay }
        let doublings = min(max(failures - 1, 0), 30)
        return min(.milliseconds(100) * (1 << doublings), settings.maxErrorDelay)
    }
}
