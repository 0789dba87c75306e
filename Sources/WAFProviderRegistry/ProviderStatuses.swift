import NIOConcurrencyHelpers
import WAFTokenCore

/// The statuses of several providers, asked for together, handed over once all have answered.
package enum ProviderStatuses {
    package static func gather(_ entries: [ProviderEntry], _ completion: @escaping @Sendable ([String: WAFProviderStatus]) -> Void) {
        let collected = NIOLockedValueBox<[String: WAFProviderStatus]>([:])
        let answers = Countdown<Void>(entries.count) { _ in completion(collected.withLockedValue { $0 }) }
        for entry in entries {
            entry.provider.status { status in
                collected.withLockedValue { $0[entry.name] = status }
                answers.arrived(())
            }
        }
    }
}
