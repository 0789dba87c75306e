import Logging
import WAFChallenge
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore
import WAFTokenProxy
import WAFTokenStorage

/// Makes the daemon's providers and takes them apart: each restored from its own state file,
/// started with the shared token-service client, watched (its events go to `/v1/events`, the
/// metrics and the status line, named), with its own proxy; at removal stopped and its files
/// cleared. The start and every reload make providers the same way.
struct ProviderFactory: Sendable {
    let parts: DaemonParts

    /// A provider of `configuration`, not yet in the registry, and its proxy (not yet started).
    /// `socket` is the socket's access policy, which a provider without lists of its own shares;
    /// `lifecycle` the app's state, which a provider added by a reload starts in.
    func make(
        _ configuration: ProviderConfiguration, daemon: DaemonConfiguration, socket: AccessPolicy, lifecycle: WAFLifecycleState = .foreground
    ) throws(DaemonFailure) -> (entry: ProviderEntry, proxy: ProxyController) {
        let name = configuration.name
        var logger = parts.logger
        logger[metadataKey: "provider"] = "\(name)"
        let restored: WAFTokenProviderOptions.RestoredToken?
        do {
            restored = try daemon[Keys.stateDirectory].map { StateStore(directory: $0, provider: name) }?.load(
                for: configuration.identity, logger: logger)
        } catch {
            throw DaemonFailure(.osError, error.message)
        }
        if let restored { logger.info("restored the saved token", metadata: ["token.fingerprint": "\(WAFToken.fingerprint(of: restored.value))"]) }
        let (persistence, generation) = (parts.persistence, parts.generation)
        let provider = WAFTokenProvider(
            configuration: configuration.configuration, fetcher: parts.fetcher.provider(name),
            scheduler: DispatchScheduler(label: "waf-tokend.provider.\(name)"),
            options: WAFTokenProviderOptions(
                lifecycleProfile: daemon[Keys.lifecyclePlatform], lifecycle: lifecycle, jitter: daemon[Keys.refreshJitter],
                cookieSecure: daemon[Keys.cookieSecure],
                restoredToken: restored, persist: { persistence.persist($0, of: name) }, snapshotChanged: generation.advance, logger: logger))
        let (broadcaster, metrics, status, hooks, fetcher) = (parts.broadcaster, parts.metrics, parts.status, parts.hooks, parts.fetcher)
        hooks.configure(configuration, daemon)
        provider.observe { event in
            broadcaster.publish(event, provider: name)
            switch event {
            case .tokenUpdated(let token, .fetched):
                metrics.countFetch(provider: name, egress: fetcher.label(of: name), success: true)
                hooks.tokenFetched(token.value, of: name)
            case .refreshFailed(.invalidChallenge(let reason), _, _):
                metrics.countFetch(provider: name, egress: fetcher.label(of: name), success: false)
                if let unsolvable = UnsolvableChallenge.reason(reason) { metrics.countUnsolvable(provider: name, reason: unsolvable) }
            case .refreshFailed: metrics.countFetch(provider: name, egress: fetcher.label(of: name), success: false)
            default: break
            }
            status.report()
        }
        let entry = ProviderEntry(
            name: name, provider: provider, access: Self.access(configuration, in: daemon, socket: socket, logger: logger),
            forcedRefresh: ForcedRefresh(interval: .seconds(daemon[Keys.refreshMinForcedIntervalSec])) { decision in
                metrics.countForcedRefresh(provider: name, decision)
            }, generation: generation)
        parts.canaries.configure(entry, configuration, daemon)
        return (entry, ProxyController(entry: entry, metrics: metrics, budget: parts.budget, logger: logger))
    }

    /// Stops a provider that is gone from the configuration: no more fetches, its proxy closed.
    /// (Its files go when storage is told the new layout.)
    func retire(_ entry: ProviderEntry, proxy: ProxyController?) async {
        entry.provider.shutdown()
        parts.persistence.forget(entry.name)
        await proxy?.stop()
    }

    /// Who may take the provider's token (`DaemonConfiguration.readers(of:)`, TENANT-10): its own
    /// lists as a pair, else the socket's policy itself.
    static func access(
        _ configuration: ProviderConfiguration, in daemon: DaemonConfiguration, socket: AccessPolicy, logger: Logger
    ) -> AccessPolicy {
        let readers = daemon.readers(of: configuration)
        guard readers != daemon.socketLists else { return socket }
        return AccessPolicy(
            allowedUsers: readers.users, allowedGroups: readers.groups, keyPrefix: "providers.\(configuration.name)", logger: logger)
    }
}

extension StorageLayout {
    /// Where every provider of `configuration` keeps its files, and which group owns them: each
    /// jar holds the providers that name it (their own, or the top level's), which the
    /// configuration allows only when their readers are the same (TENANT-1).
    init(_ configuration: DaemonConfiguration) {
        let state = configuration[Keys.stateDirectory]
        var providers: [String: Target] = [:]
        var jars: [String: Jar] = [:]
        for provider in configuration.providers {
            let group = configuration.inherited(Keys.sinksGroup, for: provider)
            providers[provider.name] = Target(
                identity: provider.identity, tokenFile: provider[Keys.sinksTokenFile],
                stateFile: state.map { StateStore(directory: $0, provider: provider.name) }, group: group)
            if let jar = configuration.inherited(Keys.sinksCookieJar, for: provider) {
                jars[jar, default: Jar(providers: [], group: group)].providers.insert(provider.name)
            }
        }
        self.init(providers: providers, cookieJars: jars)
    }
}
