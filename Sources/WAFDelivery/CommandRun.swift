import CLinuxProcess

#if canImport(Glibc)
import Glibc
#endif

/// A command run once for a new token: its argv as configured (no shell), the token on standard
/// input only (never in argv or the environment, where other users' `ps` and `/proc` see them),
/// output discarded (a command that echoes its input must not put the token in a log), run as the
/// daemon's user, in a process group of its own. When it outlives `timeout`, its whole group ends
/// (SIGTERM, SIGKILL after `Spawned.hookGrace`); when it ends, so does whatever it left running in
/// its group (HOOK-7). Blocks the calling thread: run it on a thread of its own.
public enum CommandRun {
    /// `started` is told of the child (whoever stops the daemon may kill it).
    public static func run(
        _ argv: [String], input: String, environment: [String: String], timeout: Duration, started: (Spawned) -> Void = { _ in }
    ) throws(DeliveryFailure) {
        let child = try Spawned(argv, environment: environment, stdin: .pipe(Array(input.utf8)), output: .null)
        started(child)
        switch child.wait(timeout: timeout, leftoverGrace: Spawned.hookGrace) {
        case .exited(0):
            return
        case .exited(let status):
            throw DeliveryFailure("\(argv[0]) exited with \(status)")
        case .signalled(let signal):
            throw DeliveryFailure("\(argv[0]) was killed by signal \(signal)")
        case nil:
            child.terminate(grace: Spawned.hookGrace)
            throw DeliveryFailure("\(argv[0]) still ran after \(timeout.components.seconds) s; its process group was ended", timedOut: true)
        }
    }
}
