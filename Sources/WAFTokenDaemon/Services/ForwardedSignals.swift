import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM, SIGINT and SIGHUP for `waf-tokend exec`, taken from its first moment: their default
/// actions off and their sources armed before the configuration is loaded, so that a stop that
/// comes while the daemon starts (a pod deleted during start-up) is kept until the supervisor
/// takes it, rather than ignored.
final class ForwardedSignals: @unchecked Sendable {
    // @unchecked: `sources` is set once in init and only read after; dispatch sources are
    // thread-safe but not marked Sendable on Linux. Everything else is in the lock.
    static let numbers: [Int32] = [SIGTERM, SIGINT, SIGHUP]

    private let queue = DispatchQueue(label: "waf-tokend.exec.signals")
    private let state = NIOLockedValueBox<(pending: [Int32], handler: (@Sendable (Int32) -> Void)?)>(([], nil))
    private var sources: [any DispatchSourceSignal] = []

    /// Made before anything else arms a signal: ignoring one after a dispatch source for it exists
    /// would take the source's handler away.
    init() {
        for number in Self.numbers { signal(number, SIG_IGN) }
        sources = Self.numbers.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [state] in
                let handler = state.withLockedValue { state in
                    if state.handler == nil { state.pending.append(number) }
                    return state.handler
                }
                handler?(number)
            }
            source.resume()
            return source
        }
    }

    /// From now on each signal goes to `handler`, after those that came before, in their order.
    func attach(_ handler: @escaping @Sendable (Int32) -> Void) {
        queue.sync {
            let pending = state.withLockedValue { state in
                state.handler = handler
                defer { state.pending = [] }
                return state.pending
            }
            pending.forEach(handler)
        }
    }

    /// No more signals taken (they stay ignored: the process is ending).
    func cancel() {
        state.withLockedValue { $0.handler = nil }
        sources.forEach { $0.cancel() }
    }
}
