import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFProviderRegistry
import WAFTokenCore

/// The providers, as a service of the group: they run from the moment the runtime made them
/// (each on its own queue), and stop when the group stops. The group stops its services in
/// reverse order, and this one sits after storage and before the others: the listeners have
/// stopped (no request waits on a provider any more), and storage, stopped after it, writes
/// their last records. What follows the tokens out stops first: delivery hooks, then canaries.
final class ProvidersService: Service, Sendable {
    let providers: ProviderSet
    let hooks: DeliveryHooks
    let canaries: Canaries
    /// A wedged provider must not hold the stop up for ever: past this the daemon exits without it.
    let limit: Duration
    let logger: Logger
    /// Set when a provider did not stop within the limit: the daemon then exits 1 without it (under
    /// `exec`, with the child's status, as for any failure after the child ended).
    let wedged = NIOLockedValueBox(false)

    init(providers: ProviderSet, hooks: DeliveryHooks, canaries: Canaries, limit: Duration, logger: Logger) {
        self.providers = providers
        self.hooks = hooks
        self.canaries = canaries
        self.limit = limit
        self.logger = logger
    }

    func run() async {
        // Asked to stop gracefully, or cancelled because another service failed: either way
        // they stop (in the second case without waiting for the listeners' drain).
        try? await gracefulShutdown()
        // Off the concurrency pool: a hook's group may take its grace to end.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [hooks] in
                hooks.stopAll()
                done.resume()
            }
        }
        await canaries.stopAll()
        guard await Self.stop(providers.all, within: limit) else {
            logger.error("a provider did not stop within \(limit); exiting without it")
            wedged.withLockedValue { $0 = true }
            return
        }
    }

    /// Stops every provider; false when they did not all stop within `limit`. A provider's stop
    /// waits on its state queue, which a wedged provider never runs, so it blocks a thread of its
    /// own (never the concurrency pool's two).
    static func stop(_ entries: [ProviderEntry], within limit: Duration) async -> Bool {
        await BoundedWait.wait(within: limit) { done in
            DispatchQueue(label: "waf-tokend.stop").async {
                for entry in entries { entry.provider.shutdown() }
                done()
            }
        }
    }
}
