import Logging
import NIOConcurrencyHelpers
import WAFDaemonConfiguration
import WAFDaemonTransport
import WAFDelivery
import WAFSocketAPI
import WAFTokenStorage

/// Each provider's delivery actions (`sinks.onToken`, docs/delivery.md), by provider name: told
/// of every fetched token, they run once its files hold it. An outcome is an event (`hook`), a log
/// line and a metric, never with the token.
final class DeliveryHooks: Sendable {
    private let runners = NIOLockedValueBox<[String: (actions: [DeliveryAction], runner: HookRunner)]>([:])
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
    /// actions stay is kept, with its runs and retries.
    func configure(_ provider: ProviderConfiguration, _ configuration: DaemonConfiguration) {
        let actions = configuration.inherited(Keys.sinksOnToken, for: provider) ?? []
        let old = runners.withLockedValue { runners -> HookRunner? in
            if runners[provider.name]?.actions == actions { return nil }
            let old = runners.removeValue(forKey: provider.name)?.runner
            if !actions.isEmpty { runners[provider.name] = (actions, makeRunner(provider.name, actions, configuration)) }
            return old
        }
        old?.stop()
    }

    /// The daemon stops: no more retries, and a command under way is killed.
    func stopAll() {
        for (_, runner) in runners.withLockedValue({ Array($0.values) }) { runner.stop() }
    }

    /// A provider that is gone: its retries stop.
    func remove(_ provider: String) {
        runners.withLockedValue { $0.removeValue(forKey: provider) }?.runner.stop()
    }

    private func makeRunner(_ name: String, _ actions: [DeliveryAction], _ configuration: DaemonConfiguration) -> HookRunner {
        let allowed = Set(configuration[Keys.sinksOnTokenUsers].compactMap { UInt32($0) ?? AccessPolicy.userID(named: $0) })
        let running = RunningCommand()
        let mechanisms = HookRunner.mechanisms(
            allowedUsers: allowed, timeout: .seconds(configuration[Keys.sinksOnTokenTimeoutSec]),
            environment: ["PATH": "/usr/local/bin:/usr/bin:/bin", "WAF_TOKEND_PROVIDER": name], running: running)
        let (persistence, metrics, broadcaster, logger) = (persistence, metrics, broadcaster, logger)
        return HookRunner(
            actions: actions,
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
