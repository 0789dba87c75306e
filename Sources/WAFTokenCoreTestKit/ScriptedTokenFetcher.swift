import NIOConcurrencyHelpers
import WAFTokenCore

/// An in-memory token service that follows a script, in virtual time.
public final class ScriptedTokenFetcher: WAFTokenFetcher {
    public enum Step: Sendable {
        /// Answer with a new numbered token, `token-1`, `token-2`, …
        case success
        case fail(SdkError)
    }

    public struct Call: Sendable {
        public let at: MonotonicInstant
        public let existingToken: String?
        /// Whom the token was asked for.
        public let identity: WAFTokenIdentity
    }

    private struct State {
        var script: [Step]
        var calls: [Call] = []
        var issued = 0
        var inFlight = 0
        var maxInFlight = 0
        var issuedFor: [String: WAFTokenIdentity] = [:]
    }

    private let scheduler: VirtualScheduler
    private let fallback: Step
    private let latency: Duration
    private let state: NIOLockedValueBox<State>

    /// Follows `script`, then answers `fallback` for ever. Each fetch takes `latency` of virtual time.
    public init(scheduler: VirtualScheduler, script: [Step] = [], then fallback: Step = .success, latency: Duration = .zero) {
        self.scheduler = scheduler
        self.fallback = fallback
        self.latency = latency
        state = NIOLockedValueBox(State(script: script))
    }

    public static let outage = SdkError.errorInvokingGetChallengeEndpoint("HTTP 503")

    public func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        let now = scheduler.now
        let step = state.withLockedValue { state in
            state.calls.append(Call(at: now, existingToken: request.existingToken, identity: request.configuration.identity))
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.script.isEmpty ? fallback : state.script.removeFirst()
        }
        defer { state.withLockedValue { $0.inFlight -= 1 } }
        if latency > .zero {
            do {
                try await scheduler.sleep(for: latency)
            } catch {
                throw .unexpected(error)
            }
        }
        switch step {
        case .success:
            let value = state.withLockedValue { state in
                state.issued += 1
                return "token-\(state.issued)"
            }
            state.withLockedValue { $0.issuedFor[value] = request.configuration.identity }
            return value
        case .fail(let error):
            throw error
        }
    }

    public var calls: [Call] { state.withLockedValue { $0.calls } }
    public var callCount: Int { calls.count }
    /// When each fetch started, as time since the virtual origin.
    public var callTimes: [Duration] { calls.map(\.at.sinceOrigin) }
    public var maxInFlight: Int { state.withLockedValue { $0.maxInFlight } }

    /// The identity each token issued so far was asked for.
    public var issuedFor: [String: WAFTokenIdentity] { state.withLockedValue { $0.issuedFor } }
}
