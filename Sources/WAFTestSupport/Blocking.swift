import Foundation

#if canImport(Glibc)
import Glibc
#endif

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
