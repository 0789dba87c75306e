import Dispatch
import Logging
import ServiceLifecycle
import WAFProviderRegistry
import WAFTokenCore

/// The providers, as a service of the group: they run from the moment the runtime made them
/// (each on its own queue), and stop when the group stops. The group stops its services in
/// reverse order, and this one sits after storage and before the others: the listeners have
/// stopped (no request waits on a provider any more), and storage, stopped after it, writes
/// their last records. What follows the tokens out stops first: delivery hooks, then canaries.
struct ProvidersService: Service {
    let providers: ProviderSet
    let hooks: DeliveryHooks
    let canaries: Canaries
    /// A wedged provider must not hold the stop up for ever: past this the daemon exits without it.
    let limit: Duration

    /// A provider did not stop within the limit: the daemon exits 1 without it.
    struct Wedged: Error, CustomStringConvertible {
        let limit: Duration
        var description: String { "a provider did not stop within \(limit); exiting without it" }
    }

    func run() async throws {
        // Cancelled (another service failed) or asked to stop gracefully: either way they stop.
        try? await gracefulShutdown()
        hooks.stopAll()
        await canaries.stopAll()
        guard await Self.stop(providers.all, within: limit) else { throw Wedged(limit: limit) }
    }

    /// Stops every provider; false when they did not all stop within `limit`. A provider's stop
    /// waits on its state queue, which a wedged provider never runs, so it blocks a thread of its
    /// own (never the concurrency pool's two); the stop and the limit race, and the first answers.
    static func stop(_ entries: [ProviderEntry], within limit: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let first = Once()
            DispatchQueue(label: "waf-tokend.stop").async {
                for entry in entries { entry.provider.shutdown() }
                if first.claim() { continuation.resume(returning: true) }
            }
            let (seconds, attoseconds) = limit.components
            DispatchQueue(label: "waf-tokend.stop-limit").asyncAfter(
                deadline: .now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
            ) {
                if first.claim() { continuation.resume(returning: false) }
            }
        }
    }
}
