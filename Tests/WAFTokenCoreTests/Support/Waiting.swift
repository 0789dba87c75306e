import Foundation
import NIOConcurrencyHelpers
import WAFTestTraits
import WAFTokenCoreTestKit

// Every wait in these tests has a deadline: a test that would hang fails instead, with a message.

/// Runs a blocking call on its own thread while this thread drives virtual time, until the call
/// returns. Only for providers that stop scheduling once answered (background refresh disabled).
func blocking<T: Sendable>(_ harness: Harness, _ body: @escaping @Sendable () -> T) -> T? {
    let result = NIOLockedValueBox<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    startThread {
        let value = body()
        result.withLockedValue { $0 = value }
        done.signal()
    }
    let deadline = DispatchTime.now() + 10
    while done.wait(timeout: .now()) != .success {
        guard DispatchTime.now() < deadline else { return nil }
        if !harness.scheduler.advanceToNextJob() {
            // Nothing pending: the call has not submitted its request yet, or is about to return.
            harness.scheduler.waitForPendingJob(timeout: 0.05)
        }
    }
    return result.value
}

/// Waits in real time, bounded, until `condition` holds; for tests on real threads.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while !condition() {
        if clock.now >= deadline { return false }
        usleep(1000)
    }
    return true
}

/// Runs `body` and returns true if it finished within `limit`; false (and the body is cancelled)
/// otherwise.
func within(_ limit: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            await body()
            return true
        }
        group.addTask {
            try? await Task.sleep(for: limit)
            return false
        }
        let first = await group.next() ?? false
        group.cancelAll()
        return first
    }
}
