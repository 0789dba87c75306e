import Dispatch
import Logging
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFDelivery
import WAFServiceManager
import WAFSocketAPI
import WAFTokenStorage

/// Each provider's delivery actions (`sinks.onToken`, docs/delivery.md), by provider name: told
/// of every fetched token, they run once its files hold it. An outcome is an event (`hook`), a log
/// line and a metric, never with the token.
final class DeliveryHooks: Sendable {
    /// What a runner is made of: a change of any of it makes a new one.
    private struct Settings: Equatable {
        let actions: [DeliveryAction]
        let allowedUsers: Set<UInt32>
        let timeout: Int
    }

    private let runners = NIOLockedValueBox<[String: (settings: Settings, runner: HookRunner)]>([:])
    private let persistence: TokenPersistence
    private let metrics: DaemonMetrics
    private let broadcaster: EventBroadcaster
    private let logger: Logger

    init(persistence: TokenPersistence, metrics: DaemonMetrics, broadcaster: EventBroadcaster, logger: Logger) {
        self.persistence = persistence
        self.metrics = metrics
        self.broadcaster = broadcaster
        self.logger = logger
    }

    /// A provider's fetched token: its actions deliver it once its files hold it.
    func tokenFetched(_ token: String, of provider: String) {
        runners.withLockedValue { $0[provider] }?.runner.tokenArrived(token)
    }

    /// Makes `provider`'s actions what `configuration` says (none: no runner); a runner whose
    /// settings stay is kept, with its runs and retries.
    func configure(_ provider: ProviderConfiguration, _ configuration: DaemonConfiguration) {
        // Names are looked up here, outside the lock the provider's observer takes.
        // Each provider's own: one tenant's signal actions never reach another tenant's processes.
        let users = (provider[Keys.sinksOnTokenUsers] ?? []).compactMap { name in
            let id = UInt32(name) ?? AccessPolicy.userID(named: name)
            if id == nil { logger.warning("sinks.onTokenUsers: no such user; ignored", metadata: ["user": "\(name)"]) }
            return id
        }
        let settings = Settings(
            actions: configuration.inherited(Keys.sinksOnToken, for: provider) ?? [], allowedUsers: Set(users),
            timeout: configuration[Keys.sinksOnTokenTimeoutSec])
        if runners.withLockedValue({ $0[provider.name]?.settings }) == settings { return }
        if settings.actions.contains(where: \.runsACommand), !Spawned.pidfdsAvailable {
            logger.warning(
                "this kernel has no pidfds (Linux before 5.3): commands are watched by polling every 10 ms, within the same timeouts",
                metadata: ["provider": "\(provider.name)"])
        }
        let runner = settings.actions.isEmpty ? nil : makeRunner(provider.name, settings)
        // A delivery the old runner still owed (failing, retrying) goes on with the new one, handed
        // over before the new one is published, under the lock `tokenFetched` takes: a token that
        // arrives meanwhile comes after it, never before. (`stop` only waits for the runner's
        // state queue, which never takes this lock.)
        runners.withLockedValue { runners in
            if let owed = runners[provider.name]?.runner.stop() { runner?.tokenArrived(owed) }
            runners[provider.name] = runner.map { (settings, $0) }
        }
    }

    /// The daemon stops: no more retries, and a command under way ends with its whole group, before
    /// the daemon does (HOOK-7); the runners' groups end together, not one grace after another.
    func stopAll() {
        let all = runners.withLockedValue { Array($0.values) }
        DispatchQueue.concurrentPerform(iterations: all.count) { index in all[index].runner.stop(waitForCommand: true) }
    }

    /// A provider that is gone, or whose identity changes: its retries stop, and what it owed is
    /// dropped (a token of the identity it had).
    func remove(_ provider: String) {
        runners.withLockedValue { $0.removeValue(forKey: provider) }?.runner.stop()
    }

    private func makeRunner(_ name: String, _ settings: Settings) -> HookRunner {
        let running = RunningCommand()
        let reloader = DaemonIntegration.current.unitReloader
        let mechanisms = HookRunner.mechanisms(
            allowedUsers: settings.allowedUsers, timeout: .seconds(settings.timeout),
            environment: ["PATH": "/usr/local/bin:/usr/bin:/bin", "WAF_TOKEND_PROVIDER": name], running: running,
            reload: { unit throws(DeliveryFailure) in
                do throws(UnitReloadFailure) {
                    try reloader.reload(unit: unit)
                } catch {
                    throw DeliveryFailure(error.description)
                }
            })
        let (persistence, metrics, broadcaster, logger) = (persistence, metrics, broadcaster, logger)
        return HookRunner(
            actions: settings.actions,
            perform: { action, token throws(DeliveryFailure) in
                // A program is told of a token only once its files hold it.
                guard persistence.holds(token, of: name) else {
                    throw DeliveryFailure("the provider's files do not hold the new token yet (a write failed, or a newer token came)")
                }
                try mechanisms(action, token)
            }, running: running,
            report: { outcome in
                metrics.countHookRun(provider: name, action: outcome.action, result: outcome.result.rawValue)
                broadcaster.publish(named: "hook", HookEvent(outcome, provider: name), provider: name)
                let metadata: Logger.Metadata = ["provider": "\(name)", "action": "\(outcome.action)", "attempt": "\(outcome.attempt)"]
                if let reason = outcome.reason {
                    logger.warning("token delivery failed; retried with back-off until the next token: \(reason)", metadata: metadata)
                } else {
                    logger.info("token delivered", metadata: metadata)
                }
            })
    }
}

/// The `hook` event of `/v1/events`: which action, how it ended, on which try.
struct HookEvent: Encodable {
    let provider: String
    let action: String
    let result: String
    let attempt: Int
    let reason: String?

    init(_ outcome: HookRunner.Outcome, provider: String) {
        self.provider = provider
        action = outcome.action
        result = outcome.result.rawValue
        attempt = outcome.attempt
        reason = outcome.reason
    }
}

extension DeliveryAction {
    fileprivate var runsACommand: Bool {
        if case .run = self { return true }
        return false
    }
}
