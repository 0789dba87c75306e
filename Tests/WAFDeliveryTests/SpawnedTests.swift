import Foundation
import Testing
import WAFTestTraits

@testable import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

/// HOOK-7: a child in a process group of its own, ended as a group, reaped, watched with or
/// without pidfds.
@Suite("A child and its process group", .offPool, .timeLimit(.minutes(1)))
struct SpawnedTests {
    /// The process group of `pid`, from /proc (nil: gone).
    static func group(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 2 ? pid_t(fields[2]) : nil
    }

    @Test("HOOK7: the child leads a process group of its own; ending it ends what it forked, which ignores SIGTERM, and it is reaped")
    func HOOK7_groupEnds() throws {
        let child = try Spawned(
            ["/bin/sh", "-c", "trap '' TERM; (trap '' TERM; sleep 30) & sleep 30"], environment: [:], stdin: .null, output: .null)
        #expect(Self.group(of: child.pid) == child.pid, "its own group, not the daemon's")
        #expect(Self.group(of: child.pid) != getpgrp())
        let deadline = ContinuousClock.now + .seconds(5)
        while ProcessGroup.live(child.pid).count < 3, ContinuousClock.now < deadline { usleep(10_000) }
        #expect(ProcessGroup.live(child.pid).count == 3, "the shell, its subshell and the sleeps are one group")
        #expect(child.wait(timeout: .milliseconds(200)) == nil, "it runs on")
        let clock = ContinuousClock()
        let started = clock.now
        let ending = child.terminate(grace: .milliseconds(300))
        #expect(ending == .signalled(SIGKILL), "SIGTERM ignored: SIGKILL after the grace (\(String(describing: ending)))")
        #expect(clock.now - started < .seconds(3))
        #expect(ProcessGroup.live(child.pid).isEmpty, "nothing of the group runs")
        #expect(child.wait(timeout: .zero) == ending, "reaped once; asked again, the same ending")
    }

    @Test("HOOK7: a child that ended leaves nothing running behind it in its group")
    func HOOK7_leftoversEnd() throws {
        let child = try Spawned(["/bin/sh", "-c", "sleep 30 & exit 3"], environment: [:], stdin: .null, output: .null)
        #expect(child.wait(timeout: .seconds(10), leftoverGrace: .milliseconds(500)) == .exited(3))
        #expect(ProcessGroup.live(child.pid).isEmpty, "the background sleep ended with it")
    }

    @Test("HOOK7: without pidfds (a kernel before 5.3), a child is watched by polling, within the same bound")
    func HOOK7_withoutPidfds() throws {
        let child = try Spawned(["/bin/sleep", "30"], environment: [:], stdin: .null, output: .null, watchedByPidfd: false)
        let clock = ContinuousClock()
        let started = clock.now
        #expect(child.wait(timeout: .milliseconds(300)) == nil, "still running")
        let waited = clock.now - started
        #expect(waited >= .milliseconds(300) && waited < .seconds(2), "the timeout is kept: \(waited)")
        #expect(child.terminate(grace: .milliseconds(200)) == .signalled(SIGTERM))
        let quick = try Spawned(["/bin/sh", "-c", "exit 4"], environment: [:], stdin: .null, output: .null, watchedByPidfd: false)
        #expect(quick.wait(timeout: .seconds(10)) == .exited(4))
    }
}
