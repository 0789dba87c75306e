import WAFTokenCore

/// What keeps tenants apart that only the whole configuration can get wrong (docs/rules.md,
/// TENANT-1, TENANT-6, TENANT-10): a cookie jar shared by providers whose readers differ, a token
/// file or jar whose group is not among its provider's readers, and a TCP listener (which no file
/// mode guards) without lists of who may use it.
extension ConfigurationLoader {
    static func tenantIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        jarIssues(providers, top: top) + fileGroupIssues(providers, top: top) + listenerIssues(providers, top: top)
            + inheritedRunIssues(providers, top: top)
    }

    /// A `run` action hands a provider's token to a program: a top-level one that providers
    /// inherit would give one program the tokens of providers whose readers differ, as a shared
    /// jar would (HOOK-6). `signal` and `reload` carry no token and may be shared.
    private static func inheritedRunIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        guard let inherited = Keys.sinksOnToken.read(top[Keys.sinksOnToken.spec.name]),
            let run = inherited.first(where: { if case .run = $0 { true } else { false } })
        else { return [] }
        // The providers that take the top level's actions: those without their own.
        let inheriting = providers.filter { $0.isDefault || $0[Keys.sinksOnToken] == nil }
        guard let first = inheriting.first else { return [] }
        let readers = Tenancy.readers(first, top)
        return inheriting.dropFirst().compactMap { other in
            guard let key = readers.separatingKey(from: Tenancy.readers(other, top)) else { return nil }
            return WAFConfigurationIssue(
                key: "sinks.onToken", value: "\(run)",
                problem: "would hand the tokens of providers \(first.name) and \(other.name), whose readers differ (\(key)), to one program",
                allowed: "a run action per set of providers with the same readers: give \(other.name) a sinks.onToken of its own")
        }
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

    /// A provider whose readers are listed gets its files only through a group among them: the
    /// group that owns its token file and jar (`sinks.group`, its own or the top level's; without
    /// one, the daemon's group, whose members are every tenant of the socket) can read them.
    private static func fileGroupIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        providers.compactMap { provider in
            let readers = AccessLists.readers(provider, top)
            let files = [provider[Keys.sinksTokenFile], Tenancy.inherited(Keys.sinksCookieJar, provider, top)].compactMap { $0 }
            guard !readers.isOpen, !files.isEmpty else { return nil }
            let prefix = provider.isDefault ? "" : "providers.\(provider.name)."
            let group = Tenancy.inherited(Keys.sinksGroup, provider, top)
            if let group, readers.groups.contains(where: { GroupName.same($0, group) }) { return nil }
            let who = readers.groups.isEmpty ? "it lists users only" : "its groups are \(readers.groups.joined(separator: ", "))"
            return WAFConfigurationIssue(
                key: group == nil || provider[Keys.sinksGroup] != nil ? prefix + "sinks.group" : "sinks.group", value: group?.debugDescription,
                problem: group == nil
                    ? "is unset, so \(files.joined(separator: " and ")) would belong to the daemon's group, outside the readers of \(provider.name) (\(who))"
                    : "would own \(files.joined(separator: " and ")), but it is not among the readers of \(provider.name) (\(who))",
                allowed: "a group in \(provider.name)'s allowedGroups (or the socket's, when it has no lists of its own)")
        }
    }

    /// A TCP listener is let in by its lists alone: the proxy's on a loopback port needs them
    /// (the provider's readers, which its own may narrow), and `auth.listen` needs its own.
    private static func listenerIssues(_ providers: [ProviderConfiguration], top: [String: CheckedValue]) -> [WAFConfigurationIssue] {
        var issues: [WAFConfigurationIssue] = []
        for provider in providers {
            guard case .loopback? = provider[Keys.proxyListen] else { continue }
            let narrowing = AccessLists.proxyNarrowing(provider)
            if AccessLists.readers(provider, top).isOpen && (narrowing?.isOpen ?? true) {
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
        let lists = AccessLists.readers(provider, top)
        return Readers(users: Set(lists.users), groups: Set(lists.groups), fileGroup: inherited(Keys.sinksGroup, provider, top))
    }
}

extension DaemonConfiguration {
    /// An inherited daemon key (`sinks.cookieJar`, `sinks.group`) for `provider`: its own, else
    /// the top level's.
    package func inherited<Value>(_ key: SettingKey<Value?>, for provider: ProviderConfiguration) -> Value? {
        Tenancy.inherited(key, provider, values)
    }
}
