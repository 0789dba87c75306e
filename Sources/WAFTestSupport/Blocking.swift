import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking `work` (a read from a pipe, a wait for a child) on a thread of its own. The
/// cooperative pool has as many threads as cores, two here: a test that blocked one of them on a
/// pipe would stall every other test, and the in-process providers with them.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// Runs a command (curl, setpriv, a shell script) to completion and returns its exit status and
/// output; after `timeout`, SIGTERM, two seconds later SIGKILL. Not through Foundation's `Process`,
/// which watches every child through one monitor: a child that closes the socket it is watched by
/// (or a grandchild that keeps it) stalls that monitor for every other, and `waitUntilExit` spins
/// a run loop meanwhile. Here every wait is by the child's own pid, and bounded.
@discardableResult
public func run(
    _ executable: String, _ arguments: [String], timeout: Duration = .seconds(30)
) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await runDetached(executable, arguments, timeout: timeout, diagnosed: false)
}
