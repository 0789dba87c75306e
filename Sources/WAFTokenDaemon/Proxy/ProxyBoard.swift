import NIOConcurrencyHelpers
import Synchronization

/// The proxy's state as `/v1/status` and `waf-tokenctl status` show it: where it listens, where it
/// forwards, and its counts since start. Written by the proxy, read by the API.
final class ProxyBoard: Sendable {
    struct Snapshot: Sendable, Encodable, Equatable {
        var listen: String
        var upstream: String
        var tokenIn: String
        var requests: Int
        var challenges: Int
        var replays: Int
        var upstreamErrors: Int
    }

    private let route = NIOLockedValueBox<(listen: String, upstream: String, tokenIn: String)?>(nil)
    let requests = Atomic<Int>(0)
    let challenges = Atomic<Int>(0)
    let replays = Atomic<Int>(0)
    let upstreamErrors = Atomic<Int>(0)

    init() {}

    /// The proxy serves `settings` at `address` (as bound: a port 0 resolved); nil: it is off.
    func serving(_ settings: ProxySettings?, at address: String? = nil) {
        route.withLockedValue {
            $0 = settings.map { (address ?? $0.listen.description, $0.upstream.url, $0.tokenIn.rawValue) }
        }
    }

    /// nil while the proxy is off.
    var snapshot: Snapshot? {
        guard let route = route.withLockedValue({ $0 }) else { return nil }
        return Snapshot(
            listen: route.listen, upstream: route.upstream, tokenIn: route.tokenIn, requests: requests.load(ordering: .relaxed),
            challenges: challenges.load(ordering: .relaxed), replays: replays.load(ordering: .relaxed),
            upstreamErrors: upstreamErrors.load(ordering: .relaxed))
    }
}
