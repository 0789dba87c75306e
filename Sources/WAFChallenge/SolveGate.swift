import NIOConcurrencyHelpers

/// Lets one proof-of-work search run at a time in the process, the others waiting in turn.
///
/// A search already keeps every core busy: two at once finish no sooner together, and with a
/// hundred providers refreshing at once they were two hundred runnable threads, among which the
/// daemon's socket loop waited up to 62 ms for its turn (docs/performance.md, "Several providers: measured").
/// One at a time, the socket's thread competes with as many threads as there are cores.
final class SolveGate: Sendable {
    private struct State {
        var busy = false
        var waiting: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Waits for the gate; throws `CancellationError` if the task is cancelled while it waits.
    func enter() async throws {
        let id = state.withLockedValue { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Cancelled before it got in line, the handler found nothing to cancel: it is
                // checked here, under the lock, after the flag that precedes the handler is set.
                let outcome = state.withLockedValue { state -> Bool? in
                    if Task.isCancelled { return false }
                    if !state.busy {
                        state.busy = true
                        return true
                    }
                    state.waiting.append((id, continuation))
                    return nil
                }
                switch outcome {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let cancelled = state.withLockedValue { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiting.remove(at: index).continuation
            }
            cancelled?.resume(throwing: CancellationError())
        }
    }

    /// Lets the next waiter in, or opens the gate.
    func leave() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst().continuation
        }
        next?.resume()
    }
}
