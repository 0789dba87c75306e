import NIOConcurrencyHelpers
import WAFTokenCore

/// One provider of the running daemon: its token provider, who may use it, its proxy, and the
/// configuration it runs with (which a reload replaces).
final class ProviderEntry: Sendable {
    let name: String
    let provider: WAFTokenProvider
    let proxy: ProxyController
    /// The proxy's state for `/v1/status` and `waf-tokenctl status`.
    let board: ProxyBoard
    private let state: NIOLockedValueBox<(configuration: ProviderConfiguration, access: AccessPolicy)>

    init(configuration: ProviderConfiguration, provider: WAFTokenProvider, access: AccessPolicy, proxy: ProxyController, board: ProxyBoard) {
        name = configuration.name
        self.provider = provider
        self.proxy = proxy
        self.board = board
        state = NIOLockedValueBox((configuration, access))
    }

    var configuration: ProviderConfiguration { state.withLockedValue { $0.configuration } }
    var isDefault: Bool { name == ProviderName.defaultName }

    /// Who may use its token, cookie, events and refresh: its `allowedUsers`/`allowedGroups`, by
    /// default the socket's.
    var access: AccessPolicy { state.withLockedValue { $0.access } }

    func update(_ configuration: ProviderConfiguration, access: AccessPolicy) {
        state.withLockedValue { $0 = (configuration, access) }
    }

    func allows(_ peer: PeerCredentials?) -> Bool {
        guard let peer else { return false }
        return access.allows(peer)
    }
}
