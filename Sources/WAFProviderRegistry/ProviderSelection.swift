import WAFDaemonTransport
import WAFTokenCore

/// Which provider a request means (MULTI-2): `?provider=NAME`, or `?domain=HOST` (the provider
/// whose `domainName` is HOST or its closest parent), or without either `default`, or the only
/// provider. A provider the peer may not use (its `allowedUsers`, `allowedGroups`) is 403, and
/// is named nowhere to that peer.
package enum ProviderSelection {
    case provider(ProviderEntry)
    /// The answer that says why not.
    case refused(HTTPReply)
}

extension ProviderSet {
    /// The provider `query` means and `peer` may use; `operatorView`: the operator's view, which any
    /// provider may be named in and checks no peer (`metrics.listen`'s `/readyz`).
    package func select(_ query: [String: String], peer: PeerCredentials?, operatorView: Bool = false) -> ProviderSelection {
        let entry: ProviderEntry
        switch (query["provider"], query["domain"]) {
        case (.some, .some):
            return .refused(.error(.badRequest, "badRequest", "ask for one provider: ?provider=NAME or ?domain=HOST, not both"))
        case (let name?, nil):
            guard let named = self.named(name) else {
                return .refused(.error(.notFound, "unknownProvider", "no provider named \(name.prefix(64).debugDescription)\(choices(peer))"))
            }
            entry = named
        case (nil, let host?):
            guard let covering = self.covering(domain: host) else {
                return .refused(.error(.notFound, "unknownDomain", "no provider covers \(host.prefix(256).debugDescription)\(choices(peer))"))
            }
            entry = covering
        case (nil, nil):
            guard let implicit = self.implicit else {
                return .refused(
                    .error(
                        .badRequest, "providerRequired", "this daemon runs several providers: ask with ?provider=NAME or ?domain=HOST\(choices(peer))"
                    ))
            }
            entry = implicit
        }
        guard operatorView || entry.allows(peer) else {
            // Named only when the request named it: a peer learns nothing of providers it may not
            // use, not even which one a domain belongs to (TENANT-7).
            return .refused(Self.forbidden(query["provider"]))
        }
        return .provider(entry)
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
