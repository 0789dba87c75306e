import Logging
import NIOCore
import WAFTokenCore

/// A provider's proxy keys, checked together: nil when its `proxy.listen` is unset (no proxy).
struct ProxySettings: Sendable, Equatable {
    enum TokenPlacement: String, Sendable {
        case cookie, header
    }

    var listen: ListenAddress
    var mode: UInt16
    var upstream: UpstreamTarget
    var tokenIn: TokenPlacement
    var replayBufferBytes: Int
    var tokenWait: TimeAmount
    var upstreamTimeout: TimeAmount
    var allowedUsers: [String]
    var allowedGroups: [String]
    var threads: Int
    /// `tokenService.caFile`: an https upstream is checked against the same trust as the token service.
    var caFile: String?

    /// The first provider's proxy (a single-provider configuration's).
    init?(_ daemon: DaemonConfiguration) {
        self.init(daemon.providers[0], daemon)
    }

    init?(_ provider: ProviderConfiguration, _ daemon: DaemonConfiguration) {
        guard let listen = provider[Keys.proxyListen], let text = provider[Keys.proxyUpstream],
            case .success(let upstream) = UpstreamTarget.parse(text, domainName: provider.domainName)
        else { return nil }
        self.listen = listen
        self.upstream = upstream
        mode = provider[Keys.proxyMode] ?? daemon[Keys.socketMode]
        tokenIn = TokenPlacement(rawValue: provider[Keys.proxyTokenIn]) ?? .cookie
        replayBufferBytes = provider[Keys.proxyReplayBufferBytes]
        tokenWait = .seconds(Int64(provider[Keys.proxyTokenWaitSec]))
        upstreamTimeout = .seconds(Int64(provider[Keys.proxyUpstreamTimeoutSec]))
        // Its own lists; else the provider's; else the socket's.
        allowedUsers = provider[Keys.proxyAllowedUsers] ?? provider[Keys.providerAllowedUsers] ?? daemon[Keys.socketAllowedUsers]
        allowedGroups = provider[Keys.proxyAllowedGroups] ?? provider[Keys.providerAllowedGroups] ?? daemon[Keys.socketAllowedGroups]
        threads = provider[Keys.proxyThreads]
        caFile = daemon[Keys.tokenServiceCAFile]
    }

    /// What only the keys together can say wrong: an upstream without a listener or the other way
    /// round, an upstream the token must not go to.
    static func issues(_ values: [String: CheckedValue], domainName: String) -> [WAFConfigurationIssue] {
        let listen = Keys.proxyListen.spec, upstream = Keys.proxyUpstream.spec
        switch (values[listen.name], values[upstream.name]) {
        case (nil, nil):
            return []
        case (.some, nil):
            return [WAFConfigurationIssue(key: upstream.name, value: nil, problem: "is required with proxy.listen", allowed: upstream.allowed)]
        case (nil, .text(let url)?):
            return [WAFConfigurationIssue(key: listen.name, value: nil, problem: "is required with proxy.upstream (\(url))", allowed: listen.allowed)]
        case (_, .text(let url)?):
            if case .failure(let problem) = UpstreamTarget.parse(url, domainName: domainName) {
                return [WAFConfigurationIssue(key: upstream.name, value: url.debugDescription, problem: problem.text, allowed: upstream.allowed)]
            }
            return []
        default:
            return []
        }
    }

    /// The settings a reload can apply to a running listener; the rest needs a new one.
    func sameListener(as other: ProxySettings) -> Bool {
        listen == other.listen && mode == other.mode && threads == other.threads
    }
}
