/// One delivery action's decisions, as a value: a token in, what to do out; no I/O, no clock.
/// One run at a time; a token that arrives during a run makes one more run after it, with the
/// latest token (never a queue); a failed run is retried with back-off until a newer token
/// arrives, which then goes instead (docs/delivery.md).
public struct HookMachine: Sendable {
    enum State: Sendable, Equatable {
        case idle
        /// `token` is being delivered; `next`, if any, goes when this run ends.
        case running(token: String, attempt: Int, next: String?)
        /// `token`'s delivery failed `attempt - 1` times; the next try waits for a timer.
        case waiting(token: String, attempt: Int)
    }

    public enum Action: Sendable, Equatable {
        /// Deliver `token` (its `attempt`th try).
        case run(token: String, attempt: Int)
        case armRetry(after: Duration)
        case cancelRetry
    }

    private(set) var state = State.idle

    public init() {}

    /// The first retry waits this long, each next one twice as long, at most `longestRetry`.
    public static let firstRetry = Duration.seconds(1)
    public static let longestRetry = Duration.seconds(60)

    static func retryDelay(afterFailedAttempt attempt: Int) -> Duration {
        let doublings = min(max(attempt - 1, 0), 16)
        return min(firstRetry * (1 << doublings), longestRetry)
    }

    /// The sinks hold a new token.
    public mutating func tokenArrived(_ token: String) -> [Action] {
        switch state {
        case .idle:
            state = .running(token: token, attempt: 1, next: nil)
            return [.run(token: token, attempt: 1)]
        case .running(let current, let attempt, _):
            // The latest only: one more run after this one, never a queue.
            state = .running(token: current, attempt: attempt, next: token == current ? nil : token)
            return []
        case .waiting:
            state = .running(token: token, attempt: 1, next: nil)
            return [.cancelRetry, .run(token: token, attempt: 1)]
        }
    }

    /// The run in progress ended.
    public mutating func runEnded(success: Bool) -> [Action] {
        guard case .running(let token, let attempt, let next) = state else {
            preconditionFailure("a run ended while none ran: \(state)")
        }
        if let next {
            state = .running(token: next, attempt: 1, next: nil)
            return [.run(token: next, attempt: 1)]
        }
        if success {
            state = .idle
            return []
        }
        state = .waiting(token: token, attempt: attempt + 1)
        return [.armRetry(after: Self.retryDelay(afterFailedAttempt: attempt))]
    }

    /// The retry's wait is over.
    public mutating func retryDue() -> [Action] {
        guard case .waiting(let token, let attempt) = state else {
            preconditionFailure("a retry fell due while none waited: \(state)")
        }
        state = .running(token: token, attempt: attempt, next: nil)
        return [.run(token: token, attempt: attempt)]
    }

    /// The token this action still owes a delivery of: the next one queued, the one under way, or
    /// the one waiting for its retry; nil when every token was delivered. A runner replaced by a
    /// reload hands it to its successor.
    public var owed: String? {
        switch state {
        case .idle: nil
        case .running(let token, _, let next): next ?? token
        case .waiting(let token, _): token
        }
    }

    /// Whether a run is under way (for status and tests).
    public var isRunning: Bool { if case .running = state { true } else { false } }
}
