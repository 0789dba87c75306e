#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex (which the thread sanitizer sees) that can also be waited for
/// with a deadline: what a process ending at once may not wait on for ever.
final class TimedLock<Value>: @unchecked Sendable {
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

    /// Nil when the lock was not had within `wait`.
    func withLock<Result>(within wait: Duration, _ body: (inout Value) -> Result) -> Result? {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let (seconds, attoseconds) = wait.components
        let nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        guard pthread_mutex_timedlock(mutex, &deadline) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return body(&value)
    }
}
