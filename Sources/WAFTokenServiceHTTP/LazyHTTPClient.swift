import AsyncHTTPClient
import NIOConcurrencyHelpers

/// An `HTTPClient` made on its first request, not with its fetcher: a daemon that starts with a
/// token in its state directory asks nothing of the token service before `READY=1`, and making
/// the client (its pool, its configuration, the conformances the runtime looks up for their types)
/// was a tenth of that start's CPU (docs/performance.md, "Start-up in detail").
final class LazyHTTPClient: Sendable {
    private enum State {
        case unmade
        case made(HTTPClient)
        case shutDown
    }

    private let state = NIOLockedValueBox(State.unmade)
    private let make: @Sendable () -> HTTPClient

    init(_ make: @escaping @Sendable () -> HTTPClient) {
        self.make = make
    }

    /// The client, made now if no request came before; after `shutdown()` the client's own
    /// error, as a client shut down would throw it.
    func client() throws(HTTPClientError) -> HTTPClient {
        let client: HTTPClient? = state.withLockedValue { state in
            switch state {
            case .made(let client): return client
            case .shutDown: return nil
            case .unmade:
                let client = make()
                state = .made(client)
                return client
            }
        }
        guard let client else { throw .alreadyShutdown }
        return client
    }

    /// Shuts the client down if one was made; none is made after this.
    func shutdown() async throws {
        let made: HTTPClient? = state.withLockedValue { state in
            defer { state = .shutDown }
            if case .made(let client) = state { return client }
            return nil
        }
        try await made?.shutdown()
    }
}
