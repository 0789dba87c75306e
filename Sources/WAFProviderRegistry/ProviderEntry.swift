import NIOConcurrencyHelpers
import WAFDaemonTransport
import WAFTokenCore

/// One provider of the running daemon as the listeners see it: its token provider, the identity
/// and domain it answers for, who may use it, and its proxy's status board. The daemon makes it
/// and changes it on reload.
///
/// Access is decided for a token, not only for a request: a token goes to a peer only when the
/// peer is allowed now and the token was fetched for the identity those lists belong to
/// (`token(for:)`, TENANT-2). While a reload switches the identity, the provider drops the old
/// token first and the entry takes the new identity with the new lists in one step; in between,
/// no token is handed out at all.
package final class ProviderEntry: Sendable {
    /// What a reload replaces together, so that a reader never sees one without the others.
    package struct Tenancy: Sendable {
        package var identity: WAFTokenIdentity
        package var domainName: String
        package var access: AccessPolicy

        package init(identity: WAFTokenIdentity, domainName: String, access: AccessPolicy) {
            self.identity = identity
            self.domainName = domainName
            self.access = access
        }
    }

    package let name: String
    package let provider: WAFTokenProvider
    /// The proxy's state for `/v1/status` and `waf-tokenctl status`.
    package let board: ProxyBoard
    /// Forced refreshes (`POST /v1/refresh`, the proxy's challenges): at most one fetch per interval.
    package let forcedRefresh: ForcedRefresh
    /// What the token canary found (docs/canary.md).
    package let canary = CanaryBoard()
    private let state: NIOLockedValueBox<Tenancy>
    /// Moved by every `update`, so that an answer cached under the old lists is built again.
    private let generation: SnapshotGeneration?

    package init(
        name: String, provider: WAFTokenProvider, access: AccessPolicy, board: ProxyBoard = ProxyBoard(),
        forcedRefresh: ForcedRefresh = ForcedRefresh(), generation: SnapshotGeneration? = nil
    ) {
        self.name = name
        self.generation = generation
        self.provider = provider
        self.board = board
        self.forcedRefresh = forcedRefresh
        let configuration = provider.configuration
        state = NIOLockedValueBox(Tenancy(identity: configuration.identity, domainName: configuration.domainName, access: access))
    }

    package var isDefault: Bool { name == WAFProviderName.defaultName }

    package var tenancy: Tenancy { state.withLockedValue { $0 } }

    /// The domain `?domain=` and `X-Forwarded-Host` are matched against.
    package var domainName: String { tenancy.domainName }

    /// Who may use its token, cookie, events and refresh: its `allowedUsers`/`allowedGroups`, by
    /// default the socket's.
    package var access: AccessPolicy { tenancy.access }

    /// A reload's new identity, domain and lists, in one step; the fast path's cached answers
    /// and decisions are out of date from the moment they apply, not from the end of the reload.
    package func update(_ tenancy: Tenancy) {
        state.withLockedValue { $0 = tenancy }
        generation?.advance()
    }

    package func allows(_ peer: PeerCredentials?) -> Bool {
        guard let peer else { return false }
        return access.allows(peer)
    }

    /// The cached token `peer` may have now: nil when the peer may not use this provider, or when
    /// the provider holds no token of the identity the entry's lists belong to (none yet, or a
    /// reload between its steps).
    package func token(for peer: PeerCredentials?) -> (token: WAFToken, age: Duration, stale: Bool)? {
        let tenancy = tenancy
        guard let peer, tenancy.access.allows(peer) else { return nil }
        return provider.cachedToken(for: tenancy.identity)
    }

    /// The cached token of the entry's identity, whoever asks (the fast path's cache, which
    /// checks the peer on its own).
    package var currentToken: (token: WAFToken, age: Duration, stale: Bool)? {
        provider.cachedToken(for: tenancy.identity)
    }
}
