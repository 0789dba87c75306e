import NIOConcurrencyHelpers
import WAFDaemonTransport
import WAFTokenCore

/// One provider of the running daemon as the listeners see it: its token provider, its domain, who
/// may use it, and its proxy's status board. The daemon makes it and changes it on reload.
package final class ProviderEntry: Sendable {
    /// What a reload replaces together, so that a reader never sees one without the other.
    private struct Reloadable {
        var domainName: String
        var access: AccessPolicy
    }

    package let name: String
    package let provider: WAFTokenProvider
    /// The proxy's state for `/v1/status` and `waf-tokenctl status`.
    package let board: ProxyBoard
    private let state: NIOLockedValueBox<Reloadable>

    package init(name: String, provider: WAFTokenProvider, access: AccessPolicy, board: ProxyBoard = ProxyBoard()) {
        self.name = name
        self.provider = provider
        self.board = board
        state = NIOLockedValueBox(Reloadable(domainName: provider.configuration.domainName, access: access))
    }

    package var isDefault: Bool { name == ProviderEntry.defaultName }

    /// The name of the provider the top-level identity makes (`ProviderName.defaultName`).
    package static let defaultName = "default"

    /// The domain `?domain=` and `X-Forwarded-Host` are matched against.
    package var domainName: String { state.withLockedValue { $0.domainName } }

    /// Who may use its token, cookie, events and refresh: its `allowedUsers`/`allowedGroups`, by
    /// default the socket's.
    package var access: AccessPolicy { state.withLockedValue { $0.access } }

    package func update(domainName: String, access: AccessPolicy) {
        state.withLockedValue { $0 = Reloadable(domainName: domainName, access: access) }
    }

    package func allows(_ peer: PeerCredentials?) -> Bool {
        guard let peer else { return false }
        return access.allows(peer)
    }
}
