import WAFDaemonConfiguration
import WAFDaemonTransport

/// What the daemon's sandbox makes meaningless in a configuration, found at start and at each
/// reload (TENANT-14): an allow-list naming a user or group that the user namespace does not map
/// (systemd's `PrivateUsers=yes`), which every peer would then read as `nobody` past, silently.
enum SandboxCheck {
    /// One sentence per list that names such ids; empty when the map tells every named id apart.
    static func problems(_ configuration: DaemonConfiguration, map: IdentityMap = .current()) -> [String] {
        guard !map.isIdentity else { return [] }
        var lists: [(key: String, lists: AccessLists)] = [
            ("socket.allowedUsers/allowedGroups", configuration.socketLists),
            ("auth.allowedUsers/allowedGroups", configuration.authLists),
            (
                "lifecycle.allowedUsers/allowedGroups",
                AccessLists(users: configuration[Keys.lifecycleAllowedUsers], groups: configuration[Keys.lifecycleAllowedGroups])
            ),
        ]
        for provider in configuration.providers {
            let prefix = provider.isDefault ? "" : "providers.\(provider.name)."
            // Whose processes its signal actions may reach: through the namespace, all of them nobody.
            if let users = provider[Keys.sinksOnTokenUsers] { lists.append(("\(prefix)sinks.onTokenUsers", AccessLists(users: users, groups: []))) }
            lists.append(("\(prefix)allowedUsers/allowedGroups", configuration.readers(of: provider)))
            if let narrowing = configuration.proxyNarrowing(of: provider) {
                lists.append(("\(prefix)proxy.allowedUsers/allowedGroups", narrowing))
            }
        }
        var seen: Set<String> = []
        return lists.compactMap { key, lists in
            let unmapped = map.unmapped(users: lists.users, groups: lists.groups)
            guard !unmapped.isEmpty, seen.insert(key + unmapped.joined()).inserted else { return nil }
            return
                "\(key) names \(unmapped.joined(separator: ", ")), whom this sandbox shows as nobody (a user namespace: "
                + "systemd's PrivateUsers=yes); add a drop-in with PrivateUsers=no (systemctl edit waf-tokend), see docs/systemd.md"
        }
    }
}
