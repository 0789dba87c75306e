import Logging
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry

#if canImport(Glibc)
import Glibc
#endif

/// Providers on one virtual clock, in a `ProviderSet` as the daemon keeps them: each with its name,
/// its domain and the uids its lists allow. They all fetch from one scripted token service, so the
/// tokens are numbered in the order they were fetched: `token-1`, `token-2`, …
final class Registry {
    static let firstURL = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
    static let secondURL = "https://fedcba987654.us-east-1.sdk.awswaf.com/fedcba987654/fedcba987654/"
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    let scheduler = VirtualScheduler()
    let fetcher: ScriptedTokenFetcher
    let providers = ProviderSet()

    init(script: [ScriptedTokenFetcher.Step] = [], then fallback: ScriptedTokenFetcher.Step = .success) {
        fetcher = ScriptedTokenFetcher(scheduler: scheduler, script: script, then: fallback)
    }

    /// A provider for `domain` that has fetched its first token.
    func provider(domain: String = "example.com", url: String = Registry.firstURL) throws -> WAFTokenProvider {
        let provider = WAFTokenProvider(
            configuration: try WAFConfiguration(applicationIntegrationUrl: url, domainName: domain), fetcher: fetcher, scheduler: scheduler,
            options: .init(jitter: false, logger: Self.quiet))
        scheduler.runUntilIdle()
        return provider
    }

    /// A provider's entry, added to the set. `users`: the uids its lists allow; none: everyone, as
    /// on a socket without lists.
    @discardableResult
    func add(
        _ name: String, domain: String = "example.com", users: [UInt32] = [], url: String = Registry.firstURL,
        forcedRefresh: ForcedRefresh = ForcedRefresh(), generation: SnapshotGeneration? = nil
    ) throws -> ProviderEntry {
        let entry = ProviderEntry(
            name: name, provider: try provider(domain: domain, url: url), access: Self.policy(users), forcedRefresh: forcedRefresh,
            generation: generation)
        providers.insert(entry)
        return entry
    }

    /// Lists of uids only: no group, so no lookup in the group database decides anything here.
    static func policy(_ users: [UInt32]) -> AccessPolicy {
        AccessPolicy(allowedUsers: users.map { String($0) }, allowedGroups: [], logger: quiet)
    }

    static func peer(_ uid: UInt32) -> PeerCredentials {
        PeerCredentials(pid: 4242, uid: uid, gid: uid)
    }

    /// Runs the virtual clock, `step` at a time, until `done` holds or `limit` of real time has
    /// passed. A provider answers through jobs on that clock, and a failing fetch only once its
    /// retries' waits have passed (RET-3), so some answers need virtual time to move.
    func settle(step: Duration = .zero, within limit: Duration = .seconds(10), until done: () -> Bool) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        scheduler.runUntilIdle()
        while !done() {
            if clock.now >= deadline { return false }
            scheduler.advance(by: step)
            usleep(1000)
        }
        return true
    }
}

extension ProviderSelection {
    /// The name of the provider selected, or nil when refused.
    var name: String? {
        if case .provider(let entry) = self { return entry.name }
        return nil
    }

    /// Why none was selected, or nil when one was.
    var refusal: SelectionRefusal? {
        if case .refused(let refusal) = self { return refusal }
        return nil
    }
}
