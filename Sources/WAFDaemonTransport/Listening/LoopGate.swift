import NIOConcurrencyHelpers
import NIOCore

/// Work handed to a listener's event loops from outside them (a provider's answer, an event),
/// unless the loops have begun to shut down: NIO refuses work on a loop that has shut down and
/// reports it on stderr, and a provider can answer a waiting request after the socket stopped.
/// The listener closes the gate before it shuts its loops down.
package final class LoopGate: Sendable {
    private let open = NIOLockedValueBox(true)

    package init() {}

    package func execute(on eventLoop: any EventLoop, _ work: @escaping @Sendable () -> Void) {
        // Under the lock: the gate cannot close between the check and the hand-over.
        open.withLockedValue { open in
            if open { eventLoop.execute(work) }
        }
    }

    package func close() {
        open.withLockedValue { $0 = false }
    }
}
