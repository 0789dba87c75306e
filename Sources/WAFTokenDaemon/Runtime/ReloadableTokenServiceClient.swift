import NIOConcurrencyHelpers
import WAFTokenCore
import WAFTokenServiceClient

/// The provider's token-service client, replaceable on reload (a new CA file, timeout or client
/// name). A replaced client finishes the fetch it may have in flight and is shut down at exit.
final class ReloadableTokenServiceClient: WAFTokenServiceClient {
    private struct State {
        var current: HTTPTokenServiceClient
        var retired: [HTTPTokenServiceClient] = []
    }

    private let state: NIOLockedValueBox<State>

    init(_ client: HTTPTokenServiceClient) {
        state = NIOLockedValueBox(State(current: client))
    }

    var current: HTTPTokenServiceClient { state.withLockedValue { $0.current } }

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        try await current.fetchToken(request)
    }

    func replace(with client: HTTPTokenServiceClient) {
        state.withLockedValue { state in
            state.retired.append(state.current)
            state.current = client
        }
    }

    func shutdown() async {
        let clients = state.withLockedValue { [$0.current] + $0.retired }
        for client in clients { try? await client.shutdown() }
    }
}
