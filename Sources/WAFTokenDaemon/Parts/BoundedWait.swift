import Dispatch
import WAFProviderRegistry

/// Work that may never end (a wedged provider's state queue) raced against a limit, for the
/// stop: `start` is handed `done`, to call from any thread once the work ended; whichever comes
/// first, `done` or the limit, answers (true: the work ended). Neither blocks the concurrency
/// pool's two threads.
enum BoundedWait {
    static func wait(within limit: Duration, _ start: (_ done: @escaping @Sendable () -> Void) -> Void) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let first = Once()
            let (seconds, attoseconds) = limit.components
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))) {
                if first.claim() { continuation.resume(returning: false) }
            }
            start { if first.claim() { continuation.resume(returning: true) } }
        }
    }
}
