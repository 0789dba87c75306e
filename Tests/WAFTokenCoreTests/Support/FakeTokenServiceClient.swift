import Foundation
import NIOConcurrencyHelpers
@testable import WAFTokenCore
import WAFTokenCoreTestKit

/// An in-memory token service that follows a script, in virtual time.
final class FakeTokenServiceClient: WAFTokenServiceClient {
    enum Step: Sendable {
        /// Answer with a new numbered token, `token-1`, `token-2`, …
        case success
        case fail(SdkError)
    }

    struct Call: Sendable {
        let at: MonotonicInstant
        let existingToken: String?
    }

    private struct State {
        var script: [Step]
        var calls: [Call] = []
        var issued = 0
        var inFlight = 0
        var maxInFlight = 0
    }

    private let scheduler: VirtualScheduler
    private let fallback: Step
    private let latency: Duration
    private let state: NIOLockedValueBox<State>

    /// Follows `script`, then answers `fallback` for ever. Each fetch takes `latency` of virtual time.
    init(scheduler: VirtualScheduler, script: [Step] = [], then fallback: Step = .success, latency: Duration = .zero) {
        self.scheduler = scheduler
        self.fallback = fallback
        self.latency = latency
        state = NIOLockedValueBox(State(script: script))
    }

    static let outage = SdkError.errorInvokingGetChallengeEndpoint("HTTP 503")

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        let now = scheduler.now
        let step = state.withLockedValue { state in
            state.calls.append(Call(at: now, existingToken: request.existingToken))
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
            return state.withLockedValue { state in
                state.issued += 1
                return "token-\(state.issued)"
            }
        case .fail(let error):
            throw error
        }
    }

    var calls: [Call] { state.withLockedValue { $0.calls } }
    var callCount: Int { calls.count }
    /// When each fetch started, as time since the virtual origin.
    var callTimes: [Duration] { calls.map(\.at.sinceOrigin) }
    var maxInFlight: Int { state.withLockedValue { $0.maxInFlight } }
}

/// A token service whose fetches wait at a gate until the test opens it; for tests on real threads.
final class GatedTokenServiceClient: WAFTokenServiceClient {
    private struct State {
        var open = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        var calls = 0
        var inFlight = 0
        var maxInFlight = 0
        var failuresLeft: Int
    }

    private let state: NIOLockedValueBox<State>
    private let arrived = DispatchSemaphore(value: 0)

    init(failFirst failures: Int = 0) {
        state = NIOLockedValueBox(State(failuresLeft: failures))
    }

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        let number = state.withLockedValue { state in
            state.calls += 1
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.calls
        }
        arrived.signal()
        await withCheckedContinuation { continuation in
            let proceed = state.withLockedValue { state in
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if proceed { continuation.resume() }
        }
        let fail = state.withLockedValue { state in
            state.inFlight -= 1
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                return true
            }
            return false
        }
        if fail { throw FakeTokenServiceClient.outage }
        return "gated-token-\(number)"
    }

    /// Waits (real time, bounded) until a fetch has reached the gate.
    func waitForFetch(timeout: DispatchTime = .now() + 10) -> Bool {
        arrived.wait(timeout: timeout) == .success
    }

    func open() {
        let waiting = state.withLockedValue { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    var calls: Int { state.withLockedValue { $0.calls } }
    var maxInFlight: Int { state.withLockedValue { $0.maxInFlight } }
}
