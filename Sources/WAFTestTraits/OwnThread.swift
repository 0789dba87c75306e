import Foundation
import NIOConcurrencyHelpers

/// Starts a thread that runs `body` once, and lets go of `body`, and of everything it captured,
/// before the thread ends. Every test thread starts here (`scripts/check-suites.sh` holds to it).
///
/// Why: a closure given to `Thread.detachNewThread` lives until the thread exits, and is released
/// by a thread-exit destructor. If it held the last reference to a provider, the provider's
/// `deinit` dispatched its stop from there, after libdispatch's own exit destructor had freed the
/// thread's cache of continuations without forgetting it: the `async` took a freed block from that
/// cache, and a queue later freed it again. The TOK-4 storm did exactly this (its thread had a
/// `concurrentPerform` block in the cache) and the suite died of heap corruption now and then;
/// ASan named the block (allocated by `dispatch_apply_f`, freed twice). docs/development.md has
/// the hunt.
public func startThread(_ body: @escaping @Sendable () -> Void) {
    let held = NIOLockedValueBox<(@Sendable () -> Void)?>(body)
    Thread.detachNewThread {
        let work = held.withLockedValue { held in
            defer { held = nil }
            return held
        }
        work?()
    }
}

/// Runs blocking test code (a wait on a semaphore, a read from a pipe, a storm of calls) on a
/// thread of its own and awaits its result. The concurrency pool has as many threads as cores, two
/// here: a test that blocked one of them would stall every other test, and the in-process
/// providers' fetches with them.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        startThread { continuation.resume(returning: body()) }
    }
}
