import WAFDaemonConfiguration

/// What a reload changes, worked out from the configuration in force and the new one before
/// anything is touched: the providers added, kept (with their old and new settings) and removed,
/// whether the token-service client must be rebuilt, and the keys that wait for the next start.
struct ReloadPlan {
    let old: DaemonConfiguration
    let new: DaemonConfiguration
    let added: [ProviderConfiguration]
    let kept: [(old: ProviderConfiguration, new: ProviderConfiguration)]
    let removed: [String]
    let rebuildsFetcher: Bool
    /// Keys that changed but apply at the next start only.
    let deferredKeys: [String]

    init(old: DaemonConfiguration, new: DaemonConfiguration) {
        self.old = old
        self.new = new
        let before = Dictionary(uniqueKeysWithValues: old.providers.map { ($0.name, $0) })
        added = new.providers.filter { before[$0.name] == nil }
        kept = new.providers.compactMap { provider in before[provider.name].map { ($0, provider) } }
        let after = Set(new.providers.map(\.name))
        removed = old.providers.map(\.name).filter { !after.contains($0) }
        rebuildsFetcher = TokenFetcherSettings(old) != TokenFetcherSettings(new)
        deferredKeys = Keys.all.filter { !$0.appliesOnReload && old.values[$0.name] != new.values[$0.name] }.map(\.name)
    }
}
