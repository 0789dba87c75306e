import NIOConcurrencyHelpers
import WAFDaemonTransport
import WAFTokenCore

/// The providers the daemon runs, by name: what the socket API, the signals, readiness, the
/// watchdog and the status line look at. A reload adds and removes entries; readers get the set
/// as it is at that moment, the `default` provider first, then the others by name.
package final class ProviderSet: Sendable {
    private let entries = NIOLockedValueBox<[ProviderEntry]>([])

    package init() {}

    package var all: [ProviderEntry] { entries.withLockedValue { $0 } }
    package var names: [String] { all.map(\.name) }

    package func named(_ name: String) -> ProviderEntry? {
        entries.withLockedValue { $0.first { $0.name == name } }
    }

    /// The provider whose `domainName` is `host`, else the one whose domain is its closest parent.
    /// `visibleTo`: among the providers that peer may use only, so that which provider a domain
    /// belongs to tells nothing of one it may not use (TENANT-7); nil: among all.
    package func covering(domain host: String, visibleTo peer: PeerCredentials?? = nil) -> ProviderEntry? {
        let host = host.lowercased()
        let candidates = all.filter { entry in
            if let peer, !entry.allows(peer) { return false }
            let domain = entry.domainName
            return host == domain || (!WAFHost.isIPLiteral(domain) && host.hasSuffix("." + domain))
        }
        return candidates.max { $0.domainName.count < $1.domainName.count }
    }

    /// What a request without `?provider=` or `?domain=` means: `default`, or the only provider.
    package var implicit: ProviderEntry? {
        entries.withLockedValue { entries in
            entries.first { $0.name == WAFProviderName.defaultName } ?? (entries.count == 1 ? entries.first : nil)
        }
    }

    package func insert(_ entry: ProviderEntry) {
        entries.withLockedValue { entries in
            entries.removeAll { $0.name == entry.name }
            entries.append(entry)
            entries.sort { ($0.isDefault ? 0 : 1, $0.name) < ($1.isDefault ? 0 : 1, $1.name) }
        }
    }

    @discardableResult
    package func remove(_ name: String) -> ProviderEntry? {
        entries.withLockedValue { entries in
            guard let index = entries.firstIndex(where: { $0.name == name }) else { return nil }
            return entries.remove(at: index)
        }
    }
}
