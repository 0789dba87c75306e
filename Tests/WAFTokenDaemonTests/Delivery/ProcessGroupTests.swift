import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// HOOK-7 and EXEC-5: a child the daemon starts is in a process group of its own, and the whole
/// group ends with it, whatever the child does (sleeps on, ignores SIGTERM, forks).
@Suite("Children end with their whole group", .offPool, .serialized, .timeLimit(.minutes(3)))
struct ProcessGroupTests {
    /// Live processes (not zombies) running `sleep marker` (the daemon's own command line, which
    /// names the hook, is not one).
    static func running(_ marker: String) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name), let command = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(name)/cmdline")),
                command.split(separator: 0).map({ String(decoding: $0, as: UTF8.self) }).suffix(2) == ["sleep", marker],
                let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")"), stat[stat.index(close, offsetBy: 2)] != "Z"
            else { return nil }
            return pid
        }
    }

    /// Kills what a failed test left, so that one failure does not leave processes for an hour.
    static func sweep(_ marker: String) {
        for pid in running(marker) { kill(pid, SIGKILL) }
    }

    @Test(
        "HOOK7: a run hook that outlives sinks.onTokenTimeoutSec ends with its whole group: four tokens, a shell whose sleep and forked child ignore SIGTERM, nothing left running"
    )
    func HOOK7_timeoutEndsTheGroup() async throws {
        let marker = "617.\(getpid())"
        defer { Self.sweep(marker) }
        // The shell, its child and a child of that child all ignore SIGTERM: only the group's
        // SIGKILL after the grace ends them.
        let script = "trap '' TERM; (trap '' TERM; sleep \(marker)) & sleep \(marker); :"
        let action = "[{run: [/bin/sh, -c, \"\(script)\"]}]"
        let arguments = ["--sinks-on-token", action, "--sinks-on-token-timeout-sec", "1", "--refresh-min-forced-interval-sec", "0"]
        try await withDaemon(daemon: arguments) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            for _ in 0..<3 {
                #expect(try await curl(daemon.socketPath, "/v1/refresh", ["-X", "POST"]).code == 200)
                try await Task.sleep(for: .seconds(1))
            }
            #expect(await eventually(for: .seconds(5)) { !Self.running(marker).isEmpty }, "the hooks ran")
            // Each run: its timeout (1 s), then the grace (2 s) before SIGKILL; the runs go one at a time.
            let gone = await eventually(for: .seconds(30)) { Self.running(marker).isEmpty && daemon.stderr.contains("its process group was ended") }
            #expect(gone, "still running: \(Self.running(marker))")
        }
        #expect(Self.running(marker).isEmpty, "nothing outlives the daemon: \(Self.running(marker))")
    }

    @Test(
        "HOOK7: a run hook that left a child running in its group when it ended: the child ends too; and at the daemon's stop, a hook under way ends with its group"
    )
    func HOOK7_leftoversAndStop() async throws {
        let marker = "618.\(getpid())"
        defer { Self.sweep(marker) }
        // The hook returns at once and leaves a sleep behind, in its group.
        let leaver = "[{run: [/bin/sh, -c, \"sleep \(marker) & exit 0\"]}]"
        try await withDaemon(daemon: ["--sinks-on-token", leaver]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually(for: .seconds(10)) { daemon.stderr.contains("token delivered") }, "the hook ran")
            #expect(await eventually(for: .seconds(10)) { Self.running(marker).isEmpty }, "its leftover ended: \(Self.running(marker))")
        }
        let stuck = "619.\(getpid())"
        defer { Self.sweep(stuck) }
        let hanging = "[{run: [/bin/sh, -c, \"trap '' TERM; sleep \(stuck)\"]}]"
        try await withDaemon(daemon: ["--sinks-on-token", hanging, "--sinks-on-token-timeout-sec", "600"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually(for: .seconds(10)) { !Self.running(stuck).isEmpty }, "the hook runs")
            #expect(await daemon.stop() == 0)
            #expect(Self.running(stuck).isEmpty, "the stop ended the hook's group before the daemon exited: \(Self.running(stuck))")
        }
    }
}
