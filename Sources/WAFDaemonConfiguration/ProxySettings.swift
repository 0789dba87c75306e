import WAFTokenCore

/// A provider's proxy keys, checked together: nil when its `proxy.listen` is unset (no proxy).
/// Read here, where the keys are, and handed to the proxy by the daemon: no module but this one
/// and the composition root reads `Keys`.
package struct ProxySettings: Sendable, Equatable {
    package enum TokenPlacement: String, Sendable {
        case cookie, header
    }

    /// The identity the route's tokens must be fetched for (TENANT-2).
    package var identity: WAFTokenIdentity
    package var listen: ListenAddress
    package var mode: UInt16
    package var upstream: UpstreamTarget
    package var tokenIn: TokenPlacement
    package var replayBufferBytes: Int
    package var tokenWait: Duration
    package var upstreamTimeout: Duration
    /// Who may take the provider's token (`DaemonConfiguration.readers(of:)`): the one definition.
    package var readers: AccessLists
    /// `proxy.allowedUsers`/`proxy.allowedGroups`, which narrow the readers for this proxy.
    package var narrowing: AccessLists?
    package var threads: Int
    /// `tokenService.caFile`: an https upstream is checked against the same trust as the token service.
    package var caFile: String?

    /// The first provider's proxy (a single-provider configuration's).
    package init?(_ daemon: DaemonConfiguration) {
        self.init(daemon.providers[0], daemon)
    }

    package init?(_ provider: ProviderConfiguration, _ daemon: DaemonConfiguration) {
        guard let listen = provider[Keys.proxyListen], let text = provider[Keys.proxyUpstream],
            case .success(let upstream) = UpstreamTarget.parse(text, domainName: provider.domainName)
        else { return nil }
        identity = provider.identity
        self.listen = listen
        self.upstream = upstream
        mode = provider[Keys.proxyMode] ?? daemon[Keys.socketMode]
        tokenIn = TokenPlacement(rawValue: provider[Keys.proxyTokenIn]) ?? .cookie
        replayBufferBytes = provider[Keys.proxyReplayBufferBytes]
        tokenWait = .seconds(provider[Keys.proxyTokenWaitSec])
        upstreamTimeout = .seconds(provider[Keys.proxyUpstreamTimeoutSec])
        // The provider's readers, which the proxy's own lists may narrow and never widen (TENANT-10).
        readers = daemon.readers(of: provider)
        narrowing = daemon.proxyNarrowing(of: provider)
        threads = provider[Keys.proxyThreads]
        caFile = daemon[Keys.tokenServiceCAFile]
    }

    /// The settings a reload can apply to a running listener; the rest needs a new one.
    package func sameListener(as other: ProxySettings) -> Bool {
        listen == other.listen && mode == other.mode && threads == other.threads
    }
}
