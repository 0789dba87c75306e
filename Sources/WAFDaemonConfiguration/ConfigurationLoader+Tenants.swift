import WAFTokenCore

/// What keeps tenants apart that only the whole configuration can get wrong (docs/rules.md,
/// TENANT-1, TENANT-6): a cookie jar shared by providers whose readers differ, and a TCP listener
/// (which no file mode guards) without lists of who may use it.
extension ConfigurationLoader {
    static func tenantIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        jarIssues(providers, top: top) + listenerIssues(providers, top: top)
    }

    /// One jar holds the tokens of providers with the same readers only: the same access lists
    /// (their own, else the socket's) and the same `sinks.group`.
    private static func jarIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        var jars: [String: [ProviderConfiguration]] = [:]
        for provider in providers {
            if let jar = Tenancy.inherited(Keys.sinksCookieJar, provider, top) { jars[jar, default: []].append(provider) }
        }
        var issues: [WAFConfigurationIssue] = []
        for (jar, sharing) in jars.sorted(by: { $0.key < $1.key }) {
            guard let first = sharing.first else { continue }
            let readers = Tenancy.readers(first, top)
            for other in sharing.dropFirst() {
                guard let key = readers.separatingKey(from: Tenancy.readers(other, top)) else { continue }
                let own = other[Keys.sinksCookieJar] != nil
                issues.append(
                    WAFConfigurationIssue(
                        key: other.isDefault || !own ? "sinks.cookieJar" : "providers.\(other.name).sinks.cookieJar", value: jar.debugDescription,
                        problem: "would hold the tokens of providers \(first.name) and \(other.name), whose readers differ (\(key))",
                        allowed: "a jar per set of providers with the same readers: give \(other.name) a sinks.cookieJar of its own"))
            }
        }
        return issues
    }

    /// A TCP listener is let in by its lists alone: the proxy's on a loopback port needs them
    /// (its own, else the provider's or the socket's), and `auth.listen` needs its own.
    private static func listenerIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        var issues: [WAFConfigurationIssue] = []
        for provider in providers {
            guard case .loopback? = provider[Keys.proxyListen] else { continue }
            let users =
                provider[Keys.proxyAllowedUsers] ?? provider[Keys.providerAllowedUsers]
                ?? Keys.socketAllowedUsers.read(top[Keys.socketAllowedUsers.spec.name])
            let groups =
                provider[Keys.proxyAllowedGroups] ?? provider[Keys.providerAllowedGroups]
                ?? Keys.socketAllowedGroups.read(top[Keys.socketAllowedGroups.spec.name])
            if users.isEmpty && groups.isEmpty {
                let prefix = provider.isDefault ? "" : "providers.\(provider.name)."
                issues.append(
                    WAFConfigurationIssue(
                        key: prefix + "proxy.listen", value: provider[Keys.proxyListen]?.description.debugDescription,
                        problem: "is a TCP port, which no file mode guards, and no list says who may use it",
                        allowed:
                            "a Unix socket path, or a loopback port with proxy.allowedUsers or proxy.allowedGroups (or the provider's or socket's lists)"
                    ))
            }
        }
        if top[Keys.authListen.spec.name] != nil, Keys.authAllowedUsers.read(top[Keys.authAllowedUsers.spec.name]).isEmpty,
            Keys.authAllowedGroups.read(top[Keys.authAllowedGroups.spec.name]).isEmpty
        {
            issues.append(
                WAFConfigurationIssue(
                    key: Keys.authListen.spec.name, value: nil,
                    problem: "needs auth.allowedUsers or auth.allowedGroups: no file mode guards a TCP port",
                    allowed: "set with the uid or group of the proxy that asks (nginx's www-data, say)"))
        }
        return issues
    }
}

/// Who reads a provider's tokens, as the configuration says.
package enum Tenancy {
    /// An inherited daemon key for `provider`: its own, else the top level's.
    static func inherited<Value>(_ key: SettingKey<Value?>, _ provider: ProviderConfiguration, _ top: [String: CheckedValue]) -> Value? {
        provider[key] ?? key.read(top[key.spec.name])
    }

    /// The users and groups who may read a provider's token over the socket, and the group its
    /// files belong to.
    struct Readers: Equatable {
        var users: Set<String>
        var groups: Set<String>
        var fileGroup: String?

        /// The key whose values differ between `self` and `other`, nil when they read alike.
        func separatingKey(from other: Readers) -> String? {
            if users != other.users { return "allowedUsers" }
            if groups != other.groups { return "allowedGroups" }
            if fileGroup != other.fileGroup { return "sinks.group" }
            return nil
        }
    }

    static func readers(_ provider: ProviderConfiguration, _ top: [String: CheckedValue]) -> Readers {
        let own = (provider[Keys.providerAllowedUsers], provider[Keys.providerAllowedGroups])
        let users = own.0 ?? (own.1 == nil ? Keys.socketAllowedUsers.read(top[Keys.socketAllowedUsers.spec.name]) : [])
        let groups = own.1 ?? (own.0 == nil ? Keys.socketAllowedGroups.read(top[Keys.socketAllowedGroups.spec.name]) : [])
        return Readers(users: Set(users), groups: Set(groups), fileGroup: inherited(Keys.sinksGroup, provider, top))
    }
}

extension DaemonConfiguration {
    /// An inherited daemon key (`sinks.cookieJar`, `sinks.group`) for `provider`: its own, else
    /// the top level's.
    package func inherited<Value>(_ key: SettingKey<Value?>, for provider: ProviderConfiguration) -> Value? {
        Tenancy.inherited(key, provider, values)
    }
}
