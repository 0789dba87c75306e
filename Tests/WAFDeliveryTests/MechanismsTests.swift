import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

/// The mechanisms on real processes: a command's input, its timeout; a signal through a pidfd.
@Suite("Delivery: the mechanisms", .offPool, .timeLimit(.minutes(1)))
struct MechanismsTests {
    static func scratch() throws -> String {
        let path = NSTemporaryDirectory() + "waf-delivery-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("HOOK3: run gets the token on standard input only: not in its argv, not in its environment")
    func HOOK3_tokenOnStandardInputOnly() throws {
        let directory = try Self.scratch()
        let script = "cat > \(directory)/stdin; echo \"$@\" > \(directory)/argv; env > \(directory)/environ"
        try CommandRun.run(
            ["/bin/sh", "-c", script, "sh", "one"], input: "secret-token\n", environment: ["PATH": "/usr/bin:/bin"], timeout: .seconds(10))
        #expect(try String(contentsOfFile: directory + "/stdin", encoding: .utf8) == "secret-token\n")
        #expect(try !String(contentsOfFile: directory + "/argv", encoding: .utf8).contains("secret"))
        #expect(try !String(contentsOfFile: directory + "/environ", encoding: .utf8).contains("secret"))
        #expect(throws: DeliveryFailure.self) { try CommandRun.run(["/bin/false"], input: "", environment: [:], timeout: .seconds(10)) }
    }

    @Test("HOOK3: a command that outlives sinks.onTokenTimeoutSec is killed and counts as timed out")
    func HOOK3_timeout() throws {
        let clock = ContinuousClock()
        let started = clock.now
        do {
            try CommandRun.run(["/bin/sleep", "30"], input: "", environment: [:], timeout: .seconds(1))
            Issue.record("a sleep of 30 s ended within its timeout of 1 s")
        } catch {
            #expect(error.timedOut, "\(error)")
        }
        #expect(clock.now - started < .seconds(10), "killed, not waited for")
    }

    @Test("HOOK4: signal reaches the process its pid file names, through a pidfd; not a process gone, nor another user's")
    func HOOK4_signalThroughAPidfd() async throws {
        let directory = try Self.scratch()
        let counted = directory + "/hups"
        let child = try Spawned(
            ["/bin/sh", "-c", "trap 'echo hup >> \(counted)' HUP; while :; do sleep 0.05; done"], environment: ["PATH": "/usr/bin:/bin"],
            stdin: .null, output: .null)
        defer { child.kill(SIGKILL); _ = child.wait(timeout: .seconds(5)) }
        try String(child.pid).write(toFile: directory + "/app.pid", atomically: true, encoding: .utf8)
        try await Task.sleep(for: .milliseconds(200))
        for _ in 0..<3 {
            try PidfdSignal.send(SIGHUP, pidFile: directory + "/app.pid", allowedUsers: [])
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect((try? String(contentsOfFile: counted, encoding: .utf8))?.components(separatedBy: "hup").count == 4, "three SIGHUPs counted")
        // A pid file naming a process that is gone.
        let gone = try Spawned(["/bin/true"], environment: [:], stdin: .null, output: .null)
        _ = gone.wait(timeout: .seconds(5))
        try String(gone.pid).write(toFile: directory + "/gone.pid", atomically: true, encoding: .utf8)
        #expect(throws: DeliveryFailure.self) { try PidfdSignal.send(SIGHUP, pidFile: directory + "/gone.pid", allowedUsers: []) }
        // Another user's process (nobody's): refused unless that user is allowed.
        let other = try Spawned(
            ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sleep", "30"], environment: [:], stdin: .null,
            output: .null)
        defer { other.kill(SIGKILL); _ = other.wait(timeout: .seconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        try String(other.pid).write(toFile: directory + "/other.pid", atomically: true, encoding: .utf8)
        #expect(throws: DeliveryFailure.self) { try PidfdSignal.send(SIGCONT, pidFile: directory + "/other.pid", allowedUsers: []) }
        try PidfdSignal.send(SIGCONT, pidFile: directory + "/other.pid", allowedUsers: [65534])
    }

    @Test(
        "HOOK4: a pid file is believed only as far as its writer could sign it: not another user's file, not the daemon, not a FIFO, not a younger process"
    )
    func HOOK4_pidFileTrust() async throws {
        let directory = try Self.scratch()
        let child = try Spawned(["/bin/sleep", "30"], environment: [:], stdin: .null, output: .null)
        defer { child.kill(SIGKILL); _ = child.wait(timeout: .seconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        func refusal(_ name: String) -> String? {
            do throws(DeliveryFailure) {
                try PidfdSignal.send(SIGCONT, pidFile: name.hasPrefix("/") ? name : directory + "/" + name, allowedUsers: [])
                return nil
            } catch {
                return error.description
            }
        }
        // Another user's file naming this user's process: an app's uid cannot aim at us.
        try String(child.pid).write(toFile: directory + "/foreign.pid", atomically: true, encoding: .utf8)
        chown(directory + "/foreign.pid", 65534, 65534)
        #expect(refusal("foreign.pid")?.contains("belongs to uid 65534") == true, "\(refusal("foreign.pid") ?? "signalled")")
        chown(directory + "/foreign.pid", getuid(), getgid())
        #expect(refusal("foreign.pid") == nil, "the same file, ours: signalled")
        // The daemon itself.
        try String(getpid()).write(toFile: directory + "/self.pid", atomically: true, encoding: .utf8)
        #expect(refusal("self.pid")?.contains("the daemon itself") == true)
        // A FIFO in a pid file's place: refused at once, never a blocked read.
        mkfifo(directory + "/fifo.pid", 0o600)
        #expect(refusal("fifo.pid")?.contains("not a regular file") == true)
        // A file its group or others may write: anyone's claim.
        try String(child.pid).write(toFile: directory + "/open.pid", atomically: true, encoding: .utf8)
        chmod(directory + "/open.pid", 0o666)
        #expect(refusal("open.pid")?.contains("writable by its group or others") == true)
        // A stale file: written (as its time says) in this boot, before the process it names started.
        try String(child.pid).write(toFile: directory + "/stale.pid", atomically: true, encoding: .utf8)
        let written = (PidfdSignal.bootTime() + Int(time(nil))) / 2
        var times = [timespec(tv_sec: written, tv_nsec: 0), timespec(tv_sec: written, tv_nsec: 0)]
        utimensat(AT_FDCWD, directory + "/stale.pid", &times, 0)
        #expect(refusal("stale.pid")?.contains("reused pid") == true, "\(refusal("stale.pid") ?? "signalled")")
        // Before this boot, on a disk: a file left from an earlier boot, its pid anyone's now.
        times = [timespec(tv_sec: PidfdSignal.bootTime() - 3600, tv_nsec: 0), timespec(tv_sec: PidfdSignal.bootTime() - 3600, tv_nsec: 0)]
        utimensat(AT_FDCWD, directory + "/stale.pid", &times, 0)
        let scratch = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(scratch) }
        if !PidfdSignal.inMemory(scratch) {
            #expect(refusal("stale.pid")?.contains("written before this boot") == true, "\(refusal("stale.pid") ?? "signalled")")
        }
        // Before this boot, in memory (tmpfs cannot outlive a boot: the clock was stepped since):
        // the time tells nothing, the owner checks stand.
        let memory = "/dev/shm/waf-hook4-\(getpid()).pid"
        defer { unlink(memory) }
        try String(child.pid).write(toFile: memory, atomically: false, encoding: .utf8)
        utimensat(AT_FDCWD, memory, &times, 0)
        #expect(refusal(memory) == nil, "a tmpfs file from before the boot: signalled")
    }

    @Test(
        "HOOK8: a pid file's path is walked without links: alice's directory replaced by a link to bob's leads nowhere; a directory of a third user on the path is refused"
    )
    func HOOK8_pathWithoutLinks() async throws {
        let (alice, bob, carol): (UInt32, UInt32, UInt32) = (2901, 2902, 2903)
        let root = try Self.scratch()
        chmod(root, 0o755)
        // Bob's process, and his pid file for it in his own directory.
        let process = try Spawned(
            ["/usr/bin/setpriv", "--reuid=\(bob)", "--regid=\(bob)", "--clear-groups", "/bin/sleep", "30"], environment: [:], stdin: .null,
            output: .null)
        defer { process.terminate(grace: .zero) }
        try await Task.sleep(for: .milliseconds(200))
        for (user, id) in [("alice", alice), ("bob", bob), ("carol", carol)] {
            try FileManager.default.createDirectory(atPath: "\(root)/\(user)/run", withIntermediateDirectories: true)
            chown("\(root)/\(user)", id, id)
            chown("\(root)/\(user)/run", id, id)
        }
        try String(process.pid).write(toFile: "\(root)/bob/run/app.pid", atomically: false, encoding: .utf8)
        chown("\(root)/bob/run/app.pid", bob, bob)
        func refusal(_ path: String) -> String? {
            do throws(DeliveryFailure) {
                // SIGCONT: harmless to a sleep, which a refusal must never have been sent.
                try PidfdSignal.send(SIGCONT, pidFile: path, allowedUsers: [alice, bob])
                return nil
            } catch {
                return error.description
            }
        }
        #expect(refusal("\(root)/bob/run/app.pid") == nil, "bob's own file: signalled")
        // Alice swaps her run directory for a link to bob's: her pid file now names his process.
        try FileManager.default.removeItem(atPath: "\(root)/alice/run")
        symlink("\(root)/bob/run", "\(root)/alice/run")
        #expect(refusal("\(root)/alice/run/app.pid")?.contains("symbolic link") == true, "\(refusal("\(root)/alice/run/app.pid") ?? "signalled")")
        // A link for the file itself, too.
        symlink("\(root)/bob/run/app.pid", "\(root)/carol/link.pid")
        #expect(refusal("\(root)/carol/link.pid")?.contains("symbolic link") == true)
        // A hard link to bob's file in carol's directory: the file is bob's, the directory is not.
        link("\(root)/bob/run/app.pid", "\(root)/carol/run/app.pid")
        #expect(
            refusal("\(root)/carol/run/app.pid")?.contains("belongs to uid \(carol)") == true,
            "\(refusal("\(root)/carol/run/app.pid") ?? "signalled")")
        try? FileManager.default.removeItem(atPath: root)
    }
}
