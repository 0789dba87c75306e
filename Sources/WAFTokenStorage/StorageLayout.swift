import WAFTokenCore

/// Where every provider's files are, and whose each is: what `TokenPersistence` keeps up to date.
package struct StorageLayout: Sendable, Equatable {
    /// Each provider's identity, token file and state file, by name.
    package var providers: [String: Target]
    /// Each cookie jar, by path.
    package var cookieJars: [String: Jar]
    /// Token files only their owner may read (0600): `waf-tokend exec`'s private file, which no
    /// group is meant to share.
    package var ownerOnly: Set<String> = []

    package struct Target: Sendable, Equatable {
        package var identity: WAFTokenIdentity
        package var tokenFile: String?
        package var stateFile: StateStore?
        /// The group that owns its token file (`sinks.group`); nil: the daemon's own.
        package var group: String?

        package init(identity: WAFTokenIdentity, tokenFile: String? = nil, stateFile: StateStore? = nil, group: String? = nil) {
            self.identity = identity
            self.tokenFile = tokenFile
            self.stateFile = stateFile
            self.group = group
        }
    }

    /// A cookie jar: the providers whose cookies it holds, and the group that owns it.
    package struct Jar: Sendable, Equatable {
        package var providers: Set<String>
        package var group: String?

        package init(providers: Set<String>, group: String? = nil) {
            self.providers = providers
            self.group = group
        }
    }

    package init(providers: [String: Target], cookieJars: [String: Jar] = [:]) {
        self.providers = providers
        self.cookieJars = cookieJars
    }

    package var paths: Set<String> {
        Set(providers.values.flatMap { [$0.tokenFile, $0.stateFile?.path] }.compactMap { $0 } + cookieJars.keys)
    }

    /// Whose a path is, and as what.
    enum Owner {
        case cookieJar(Jar)
        case tokenFile(provider: String, group: String?, ownerOnly: Bool)
        case stateFile(provider: String, StateStore)
    }

    /// The layout by path: a record's write looks up its own paths, not every provider's (a
    /// hundred providers restoring their tokens at start-up made that quadratic, twice over).
    var owners: [String: Owner] {
        var owners: [String: Owner] = [:]
        for (name, target) in providers {
            if let file = target.tokenFile { owners[file] = .tokenFile(provider: name, group: target.group, ownerOnly: ownerOnly.contains(file)) }
            if let state = target.stateFile { owners[state.path] = .stateFile(provider: name, state) }
        }
        for (path, jar) in cookieJars { owners[path] = .cookieJar(jar) }
        return owners
    }

    /// The paths a record of `provider` may change: its token and state files, and its jar.
    func paths(of provider: String) -> [String] {
        guard let target = providers[provider] else { return [] }
        return [target.tokenFile, target.stateFile?.path].compactMap { $0 } + cookieJars.filter { $0.value.providers.contains(provider) }.map(\.key)
    }
}
