import NIOConcurrencyHelpers
import WAFTokenCore
import WAFTokenServiceHTTP

/// The providers' token-service clients, replaceable on reload (a new CA file, timeout or client
/// name): one per egress (EGRESS-1), each provider's fetches going through its own
/// (`provider(_:)`). A replaced client finishes the fetch it may have in flight and is shut down
/// at exit.
///
/// At exit, fetches still on their way out (cancelled by the provider's shutdown, but not yet
/// unwound) are waited for before the HTTP clients' event loops go: a request that reached
/// AsyncHTTPClient after that would schedule work on a loop that no longer runs.
final class ReloadableTokenFetcher: Sendable {
    private struct State {
        var settings: TokenFetcherSettings
        /// The direct client, and one per forward proxy, made when a provider first needs it.
        var clients: [OutboundRoute.Proxy?: HTTPTokenFetcher]
        var retired: [HTTPTokenFetcher] = []
        /// Each provider's route to its token service (none: direct).
        var routes: [String: OutboundRoute] = [:]
        var inFlight = 0
        var closed = false
    }

    private let state: NIOLockedValueBox<State>
    private let makeClient: @Sendable (TokenFetcherSettings, OutboundRoute.Proxy?) throws(DaemonFailure) -> HTTPTokenFetcher

    /// `direct`: the settings' direct client, made by the caller (it checks the CA file).
    init(
        settings: TokenFetcherSettings, direct: HTTPTokenFetcher,
        makeClient: @escaping @Sendable (TokenFetcherSettings, OutboundRoute.Proxy?) throws(DaemonFailure) -> HTTPTokenFetcher
    ) {
        state = NIOLockedValueBox(State(settings: settings, clients: [nil: direct]))
        self.makeClient = makeClient
    }

    /// What provider `name` fetches with: the client of its route, whatever it is at each fetch.
    func provider(_ name: String) -> any WAFTokenFetcher {
        ProviderTokenFetcher(name: name, shared: self)
    }

    /// Provider `name`'s token service is reached by `route` from its next fetch on; true when
    /// that changes the address its requests leave from (a new password for the same proxy does not).
    @discardableResult
    func route(_ name: String, _ route: OutboundRoute) -> Bool {
        state.withLockedValue { $0.routes.updateValue(route, forKey: name).map { $0.label != route.label } ?? false }
    }

    /// Provider `name` is gone (or was never put in force): its route with it.
    func forget(_ name: String) {
        _ = state.withLockedValue { $0.routes.removeValue(forKey: name) }
    }

    /// The metrics' `egress` label of provider `name`'s fetches.
    func label(of name: String) -> String {
        state.withLockedValue { $0.routes[name]?.label ?? OutboundRoute.direct.label }
    }

    func fetch(_ request: WAFTokenFetchRequest, of provider: String) async throws(SdkError) -> String {
        // A reload that changes the egress while a fetch is out: that fetch's token is from the old
        // address, and the refresh the reload asked for joined it. It is fetched again through the
        // new egress, here, so that the provider sees one fetch (no retry used up, no failure
        // counted); a third change in a row is a failure, retried as any.
        for _ in 0..<3 {
            let (client, egress) = try pick(provider)
            let token: String
            do {
                defer { state.withLockedValue { $0.inFlight -= 1 } }
                token = try await client.fetchToken(request)
            }
            if state.withLockedValue({ $0.routes[provider]?.label }) == egress { return token }
        }
        throw .networkUnavailable("the egress changed during each of three fetches")
    }

    /// Provider `name`'s client by its route, counted in flight.
    private func pick(_ provider: String) throws(SdkError) -> (HTTPTokenFetcher, String) {
        try state.withLockedValue { state -> Result<(HTTPTokenFetcher, String), SdkError> in
            guard !state.closed else { return .failure(.networkUnavailable("the daemon is stopping")) }
            // No route is no fetch, never a direct one: a token fetched from the host's own
            // address and used through a proxy is what the WAF's reuse rules catch (EGRESS-1).
            guard let route = state.routes[provider] else {
                return .failure(.networkUnavailable("provider \(provider) has no egress in force"))
            }
            let proxy = route.proxy
            if let client = state.clients[proxy] {
                state.inFlight += 1
                return .success((client, route.label))
            }
            do throws(DaemonFailure) {
                let client = try makeClient(state.settings, proxy)
                state.clients[proxy] = client
                state.inFlight += 1
                return .success((client, route.label))
            } catch {
                return .failure(.networkUnavailable(error.message))
            }
        }.get()
    }

    /// New settings: every client is replaced (the direct one by `direct`, the others as needed).
    func replace(settings: TokenFetcherSettings, direct: HTTPTokenFetcher) {
        state.withLockedValue { state in
            state.retired += state.clients.values
            state.settings = settings
            state.clients = [nil: direct]
        }
    }

    /// Refuses new fetches, waits (at most `grace`) for those in flight, then shuts the clients down.
    func shutdown(grace: Duration = .seconds(2)) async {
        state.withLockedValue { $0.closed = true }
        let deadline = ContinuousClock.now + grace
        while state.withLockedValue({ $0.inFlight }) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let clients = state.withLockedValue { Array($0.clients.values) + $0.retired }
        for client in clients { try? await client.shutdown() }
    }
}

/// One provider's fetcher: the shared clients, through the provider's route.
struct ProviderTokenFetcher: WAFTokenFetcher {
    let name: String
    let shared: ReloadableTokenFetcher

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        try await shared.fetch(request, of: name)
    }
}
