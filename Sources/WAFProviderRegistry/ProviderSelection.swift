import WAFDaemonTransport
import WAFTokenCore

/// Which provider a request means (MULTI-2): `?provider=NAME`, or `?domain=HOST` (the provider
/// whose `domainName` is HOST or its closest parent), or without either `default`, or the only
/// provider. A provider the peer may not use (its `allowedUsers`, `allowedGroups`) is 403, is
/// named nowhere to that peer, and answers as a provider that does not exist (TENANT-7).
package enum ProviderSelection {
    case provider(ProviderEntry)
    /// Why not; the socket API words it as an answer (`HTTPReply(_:)` there).
    case refused(SelectionRefusal)
}

/// Why a request means no provider its peer may use. `choices`: the providers that peer may use,
/// which the answer names (and no other).
package enum SelectionRefusal: Sendable, Equatable {
    /// Both `?provider=` and `?domain=`.
    case bothSelectors
    /// No selector, and several providers with no `default` among them.
    case selectorRequired(choices: [String])
    /// A provider the peer may not use, named only if the request named it.
    case forbidden(named: String?)
    /// A selector that matches no provider this peer may use, to a peer that may not use every
    /// provider: one answer whether the provider is not there or not its (TENANT-7).
    case noneVisible(selector: String, choices: [String])
    case unknownProvider(String, choices: [String])
    case unknownDomain(String, choices: [String])
}

extension ProviderSet {
    /// The provider `query` means and `peer` may use; `operatorView`: the operator's view, which any
    /// provider may be named in and checks no peer (`metrics.listen`'s `/readyz`).
    package func select(_ query: [String: String], peer: PeerCredentials?, operatorView: Bool = false) -> ProviderSelection {
        let entry: ProviderEntry?
        switch (query["provider"], query["domain"]) {
        case (.some, .some):
            return .refused(.bothSelectors)
        case (let name?, nil):
            entry = self.named(name)
        case (nil, let host?):
            // The closest parent among the providers the peer may use: one it may not use neither
            // answers nor shadows a parent it may (TENANT-7).
            entry = self.covering(domain: host, visibleTo: operatorView ? nil : .some(peer))
        case (nil, nil):
            guard let implicit = self.implicit else { return .refused(.selectorRequired(choices: choices(peer))) }
            guard operatorView || implicit.allows(peer) else { return .refused(.forbidden(named: nil)) }
            return .provider(implicit)
        }
        if let entry, operatorView || entry.allows(peer) { return .provider(entry) }
        return .refused(notAvailable(query, to: peer, operatorView: operatorView))
    }

    /// Why a selector means no provider `peer` may use. To a peer that may not use every provider,
    /// a provider it may not use and no provider at all look the same; it learns neither that a
    /// name exists nor which provider a domain belongs to (TENANT-7). To anyone else (and in the
    /// operator's view) an unknown name or domain is named (MULTI-2).
    private func notAvailable(_ query: [String: String], to peer: PeerCredentials?, operatorView: Bool) -> SelectionRefusal {
        if !operatorView && visibleProviders(to: peer).count < all.count {
            return .noneVisible(selector: query["provider"] != nil ? "?provider=" : "?domain=", choices: choices(peer))
        }
        if let name = query["provider"] { return .unknownProvider(name, choices: choices(peer)) }
        return .unknownDomain(query["domain"] ?? "", choices: choices(peer))
    }

    /// The providers `peer` may use, in order.
    package func visibleProviders(to peer: PeerCredentials?) -> [ProviderEntry] {
        all.filter { $0.allows(peer) }
    }

    private func choices(_ peer: PeerCredentials?) -> [String] {
        visibleProviders(to: peer).map(\.name)
    }
}
