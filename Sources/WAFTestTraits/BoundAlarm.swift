import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// Ends the run when a test outlives its bound. A hung test cannot be cancelled from outside (a
/// synchronous loop never looks), and a run that waits for it ends only when CI kills it, naming
/// nothing; so the run stops here, naming the test and every test still running.
// DispatchSourceTimer is thread-safe; it is not marked Sendable on Linux.
final class BoundAlarm: @unchecked Sendable {
    private let timer: DispatchSourceTimer

    init(test: String, span: Int, bound: Duration) {
        let timer = DispatchSource.makeTimerSource(queue: BoundAlarm.queue)
        self.timer = timer
        timer.schedule(deadline: .now() + .nanoseconds(Int(bound.components.seconds * 1_000_000_000)))
        timer.setEventHandler {
            let running = RunningTests.shared.runningNames().joined(separator: "\n  ")
            // What the test's helpers say of the processes they started (the daemon's last lines):
            // the run stops here, and CI's log is all that is left of it.
            let report = TestDiagnostics.report(for: span)
            let message = """

                ✘ Test "\(test)" did not end within its bound of \(bound) (its .timeLimit, else 5 minutes): \
                stopping the run. Still running:
                  \(running)
                \(report.isEmpty ? "" : "What its helpers report:\n" + report + "\n")
                """
            fflush(nil)
            var bytes = Array(message.utf8)
            _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            _exit(1)
        }
        timer.resume()
    }

    func cancel() { timer.cancel() }

    private static let queue = DispatchQueue(label: "test bound alarms")
}
