import Dispatch
import NIOConcurrencyHelpers
import WAFProviderRegistry
import WAFServiceManager
import WAFTokenCore

/// Tells the service manager the providers' state in one line (`STATUS=`) after every change:
/// one provider's as before (`token fresh (age 12s), foreground, next refresh in 288s`), several
/// summed up (`3 providers, 2 with a fresh token; pay: no token yet, 2 failed attempts …`). Changes
/// that come together (every provider fetching at start) make one line.
final class StatusReporter: Sendable {
    static let coalesce = DispatchTimeInterval.milliseconds(50)

    private let providers: ProviderSet
    private let notifier: any ServiceNotifier
    private let queue = DispatchQueue(label: "waf-tokend.status")
    private let pending = NIOLockedValueBox(false)

    init(providers: ProviderSet, notifier: any ServiceNotifier) {
        self.providers = providers
        self.notifier = notifier
    }

    func report() {
        let first = pending.withLockedValue { pending in
            defer { pending = true }
            return !pending
        }
        guard first else { return }
        queue.asyncAfter(deadline: .now() + Self.coalesce) { [self] in
            pending.withLockedValue { $0 = false }
            let entries = providers.all
            ProviderStatuses.gather(entries) { [notifier] statuses in
                notifier.status(StatusLine.compose(entries.compactMap { entry in statuses[entry.name].map { (entry.name, $0) } }))
            }
        }
    }
}
