#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex (which the thread sanitizer sees) that can also be waited for
/// with a deadline: what a process ending at once may not wait on for ever.
final class TimedLock<Value: Sendable>: @unchecked Sendable {
    // Sendable by hand: `value` is read and written only while `mutex` is held.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Nil when the lock was not had within `wait` (on the monotonic clock: a wall clock stepped
    /// meanwhile neither shortens nor stretches it). Tried every millisecond, as
    /// `pthread_mutex_clocklock` is not in the Swift overlay: this is the path of a process that is
    /// ending anyway.
    func withLock<Result>(within wait: Duration, _ body: (inout Value) -> Result) -> Result? {
        let clock = ContinuousClock()
        let deadline = clock.now + max(wait, .zero)
        while pthread_mutex_trylock(mutex) != 0 {
            guard clock.now < deadline else { return nil }
            usleep(1_000)
        }
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
