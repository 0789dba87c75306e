import NIOConcurrencyHelpers
import WAFTokenCore
import WAFTokenServiceHTTP

/// The provider's token-service client, replaceable on reload (a new CA file, timeout or client
/// name). A replaced client finishes the fetch it may have in flight and is shut down at exit.
///
/// At exit, fetches still on their way out (cancelled by the provider's shutdown, but not yet
/// unwound) are waited for before the HTTP clients' event loops go: a request that reached
/// AsyncHTTPClient after that would schedule work on a loop that no longer runs.
final class ReloadableTokenFetcher: WAFTokenFetcher {
    private struct State {
        var current: HTTPTokenFetcher
        var retired: [HTTPTokenFetcher] = []
        var inFlight = 0
        var closed = false
    }

    private let state: NIOLockedValueBox<State>

    init(_ client: HTTPTokenFetcher) {
        state = NIOLockedValueBox(State(current: client))
    }

    var current: HTTPTokenFetcher { state.withLockedValue { $0.current } }

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        let client = state.withLockedValue { state -> HTTPTokenFetcher? in
            guard !state.closed else { return nil }
            state.inFlight += 1
            return state.current
        }
        guard let client else { throw .networkUnavailable("the daemon is stopping") }
        defer { state.withLockedValue { $0.inFlight -= 1 } }
        return try await client.fetchToken(request)
    }

    func replace(with client: HTTPTokenFetcher) {
        state.withLockedValue { state in
            state.retired.append(state.current)
            state.current = client
        }
    }

    /// Refuses new fetches, waits (at most `grace`) for those in flight, then shuts the clients down.
    func shutdown(grace: Duration = .seconds(2)) async {
        state.withLockedValue { $0.closed = true }
        let deadline = ContinuousClock.now + grace
        while state.withLockedValue({ $0.inFlight }) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let clients = state.withLockedValue { [$0.current] + $0.retired }
        for client in clients { try? await client.shutdown() }
    }
}
