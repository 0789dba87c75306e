import WAFDaemonTransport
import WAFTokenCore

/// Which provider a request means (MULTI-2): `?provider=NAME`, or `?domain=HOST` (the provider
/// whose `domainName` is HOST or its closest parent), or without either `default`, or the only
/// provider. A provider the peer may not use (its `allowedUsers`, `allowedGroups`) is 403, is
/// named nowhere to that peer, and answers as a provider that does not exist (TENANT-7).
package enum ProviderSelection {
    case provider(ProviderEntry)
    /// The answer that says why not.
    case refused(HTTPReply)
}

extension ProviderSet {
    /// The provider `query` means and `peer` may use; `operatorView`: the operator's view, which any
    /// provider may be named in and checks no peer (`metrics.listen`'s `/readyz`).
    package func select(_ query: [String: String], peer: PeerCredentials?, operatorView: Bool = false) -> ProviderSelection {
        let entry: ProviderEntry?
        switch (query["provider"], query["domain"]) {
        case (.some, .some):
            return .refused(.error(.badRequest, "badRequest", "ask for one provider: ?provider=NAME or ?domain=HOST, not both"))
        case (let name?, nil):
            entry = self.named(name)
        case (nil, let host?):
            // The closest parent among the providers the peer may use: one it may not use neither
            // answers nor shadows a parent it may (TENANT-7).
            entry = self.covering(domain: host, visibleTo: operatorView ? nil : .some(peer))
        case (nil, nil):
            guard let implicit = self.implicit else {
                return .refused(
                    .error(
                        .badRequest, "providerRequired", "this daemon runs several providers: ask with ?provider=NAME or ?domain=HOST\(choices(peer))"
                    ))
            }
            guard operatorView || implicit.allows(peer) else { return .refused(Self.forbidden(nil)) }
            return .provider(implicit)
        }
        if let entry, operatorView || entry.allows(peer) { return .provider(entry) }
        return .refused(notAvailable(query, to: peer, operatorView: operatorView))
    }

    /// The answer to a selector that means no provider `peer` may use. To a peer that may not use
    /// every provider, a provider it may not use and no provider at all look the same: 403 and one
    /// body, which names only the providers it may use; it learns neither that a name exists nor
    /// which provider a domain belongs to (TENANT-7). To anyone else (and in the operator's view)
    /// an unknown name or domain is 404, named (MULTI-2).
    private func notAvailable(_ query: [String: String], to peer: PeerCredentials?, operatorView: Bool) -> HTTPReply {
        let restricted = !operatorView && visibleProviders(to: peer).count < all.count
        if restricted {
            let by = query["provider"] != nil ? "?provider=" : "?domain="
            return .error(.forbidden, "forbidden", "no provider this user may use matches this \(by) (allowedUsers, allowedGroups)\(choices(peer))")
        }
        if let name = query["provider"] {
            return .error(.notFound, "unknownProvider", "no provider named \(name.prefix(64).debugDescription)\(choices(peer))")
        }
        return .error(.notFound, "unknownDomain", "no provider covers \((query["domain"] ?? "").prefix(256).debugDescription)\(choices(peer))")
    }

    /// 403 for a provider the peer may not use, naming it only if `named` (the request named it).
    package static func forbidden(_ named: String?) -> HTTPReply {
        .error(
            .forbidden, "forbidden",
            "this user may not use \(named.map { "provider \($0)" } ?? "the provider this request means") (its allowedUsers, allowedGroups)")
    }

    /// The providers `peer` may use, in order.
    package func visibleProviders(to peer: PeerCredentials?) -> [ProviderEntry] {
        all.filter { $0.allows(peer) }
    }

    private func choices(_ peer: PeerCredentials?) -> String {
        let names = visibleProviders(to: peer).map(\.name)
        return names.isEmpty ? "" : " (providers: \(names.joined(separator: ", ")))"
    }
}
