import Logging
import NIOCore
import WAFTokenCore

/// The proxy's keys, checked together: nil when `proxy.listen` is unset (no proxy).
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

    init?(_ configuration: DaemonConfiguration) {
        guard let listen = configuration[Keys.proxyListen], let text = configuration[Keys.proxyUpstream],
            case .success(let upstream) = UpstreamTarget.parse(text, domainName: configuration.provider.domainName)
        else { return nil }
        self.listen = listen
        self.upstream = upstream
        mode = configuration[Keys.proxyMode] ?? configuration[Keys.socketMode]
        tokenIn = TokenPlacement(rawValue: configuration[Keys.proxyTokenIn]) ?? .cookie
        replayBufferBytes = configuration[Keys.proxyReplayBufferBytes]
        tokenWait = .seconds(Int64(configuration[Keys.proxyTokenWaitSec]))
        upstreamTimeout = .seconds(Int64(configuration[Keys.proxyUpstreamTimeoutSec]))
        allowedUsers = configuration[Keys.proxyAllowedUsers] ?? configuration[Keys.socketAllowedUsers]
        allowedGroups = configuration[Keys.proxyAllowedGroups] ?? configuration[Keys.socketAllowedGroups]
        threads = configuration[Keys.proxyThreads]
        caFile = configuration[Keys.tokenServiceCAFile]
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
