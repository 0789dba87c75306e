import Synchronization

/// A value behind a lock, as a reference: unlike `Mutex`, it can be captured by escaping closures.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try mutex.withLock { try body(&$0) }
    }

    var value: Value { mutex.withLock { $0 } }
}
