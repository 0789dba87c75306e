import Foundation
import NIOConcurrencyHelpers
import WAFTokenCore
import WAFTokenCoreTestKit

/// A token service whose fetches wait at a gate until the test opens it; for tests on real threads.
final class GatedTokenFetcher: WAFTokenFetcher {
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
        if fail { throw ScriptedTokenFetcher.outage }
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
