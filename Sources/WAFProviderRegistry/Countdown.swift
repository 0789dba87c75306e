import NIOConcurrencyHelpers

/// Calls `done` with the last value once `count` have arrived. (A daemon runs one provider at
/// least, so a count is never zero.)
package final class Countdown<Value: Sendable>: Sendable {
    private let remaining: NIOLockedValueBox<Int>
    private let done: @Sendable (Value) -> Void

    package init(_ count: Int, done: @escaping @Sendable (Value) -> Void) {
        remaining = NIOLockedValueBox(count)
        self.done = done
    }

    package func arrived(_ value: Value) {
        let last = remaining.withLockedValue { remaining -> Bool in
            remaining -= 1
            return remaining == 0
        }
        if last { done(value) }
    }
}
