import NIOConcurrencyHelpers
import Synchronization

/// The proxy's state as `/v1/status` and `waf-tokenctl status` show it: where it listens, where it
/// forwards, and its counts since start. Written by the proxy, read by the API.
package final class ProxyBoard: Sendable {
    package struct Snapshot: Sendable, Encodable, Equatable {
        package var listen: String
        package var upstream: String
        package var tokenIn: String
        package var requests: Int
        package var challenges: Int
        package var replays: Int
        package var upstreamErrors: Int
    }

    private let route = NIOLockedValueBox<(listen: String, upstream: String, tokenIn: String)?>(nil)
    package let requests = Atomic<Int>(0)
    package let challenges = Atomic<Int>(0)
    package let replays = Atomic<Int>(0)
    package let upstreamErrors = Atomic<Int>(0)

    package init() {}

    /// The proxy serves at `listen` (as bound: a port 0 resolved), forwarding to `upstream` with
    /// the token in `tokenIn`.
    package func serving(listen: String, upstream: String, tokenIn: String) {
        route.withLockedValue { $0 = (listen, upstream, tokenIn) }
    }

    /// The proxy is off.
    package func off() {
        route.withLockedValue { $0 = nil }
    }

    /// nil while the proxy is off.
    package var snapshot: Snapshot? {
        guard let route = route.withLockedValue({ $0 }) else { return nil }
        return Snapshot(
            listen: route.listen, upstream: route.upstream, tokenIn: route.tokenIn, requests: requests.load(ordering: .relaxed),
            challenges: challenges.load(ordering: .relaxed), replays: replays.load(ordering: .relaxed),
            upstreamErrors: upstreamErrors.load(ordering: .relaxed))
    }
}
