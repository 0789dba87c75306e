#if canImport(Glibc)
import Glibc
#endif

/// A pair of access lists, users and groups (names or ids), taken together: a provider that sets
/// one of its lists has set its readers, and the list it leaves out is empty, never the socket's.
/// Read key by key, a provider with `allowedUsers: [payapp]` under `socket.allowedGroups: [shop]`
/// was once readable by the whole `shop` group through its proxy (TENANT-10).
public struct AccessLists: Sendable, Hashable {
    public var users: [String]
    public var groups: [String]

    public init(users: [String], groups: [String]) {
        self.users = users
        self.groups = groups
    }

    /// No list: anyone who can reach the listener (the socket's file mode decides).
    public var isOpen: Bool { users.isEmpty && groups.isEmpty }

    /// The socket's lists (`socket.allowedUsers`, `socket.allowedGroups`).
    static func socket(_ top: [String: CheckedValue]) -> AccessLists {
        AccessLists(
            users: Keys.socketAllowedUsers.read(top[Keys.socketAllowedUsers.spec.name]),
            groups: Keys.socketAllowedGroups.read(top[Keys.socketAllowedGroups.spec.name]))
    }

    /// The one definition of who may take `provider`'s token, by any way (reads, events,
    /// `/v1/auth`, its proxy, its jar, its token file): its own `allowedUsers`/`allowedGroups`
    /// when it sets either, else the socket's.
    static func readers(_ provider: ProviderConfiguration, _ top: [String: CheckedValue]) -> AccessLists {
        let users = provider[Keys.providerAllowedUsers], groups = provider[Keys.providerAllowedGroups]
        guard users != nil || groups != nil else { return socket(top) }
        return AccessLists(users: users ?? [], groups: groups ?? [])
    }

    /// The proxy's own `proxy.allowedUsers`/`proxy.allowedGroups`, as a pair, when it sets either:
    /// they narrow the provider's readers, never widen them.
    static func proxyNarrowing(_ provider: ProviderConfiguration) -> AccessLists? {
        let users = provider[Keys.proxyAllowedUsers], groups = provider[Keys.proxyAllowedGroups]
        guard users != nil || groups != nil else { return nil }
        return AccessLists(users: users ?? [], groups: groups ?? [])
    }
}

extension DaemonConfiguration {
    /// Who may take `provider`'s token (`AccessLists.readers`).
    package func readers(of provider: ProviderConfiguration) -> AccessLists {
        AccessLists.readers(provider, values)
    }

    /// What narrows `provider`'s proxy beyond its readers, nil when nothing does.
    package func proxyNarrowing(of provider: ProviderConfiguration) -> AccessLists? {
        AccessLists.proxyNarrowing(provider)
    }

    /// The socket's own lists.
    package var socketLists: AccessLists { AccessLists.socket(values) }

    /// `auth.allowedUsers`/`auth.allowedGroups`.
    package var authLists: AccessLists { AccessLists(users: self[Keys.authAllowedUsers], groups: self[Keys.authAllowedGroups]) }
}

/// Group names as lists and `sinks.group` write them: a name or a numeric gid.
enum GroupName {
    /// Whether `a` and `b` name the same group: the same text, or the same gid once a name is
    /// looked up in this host's group database.
    static func same(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let first = gid(a), let second = gid(b) else { return false }
        return first == second
    }

    private static func gid(_ name: String) -> UInt32? {
        if let id = UInt32(name) { return id }
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 65536)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }
}
