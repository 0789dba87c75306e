import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@Suite("At rest the daemon sleeps", .offPool, .timeLimit(.minutes(2)))
struct AtRestTests {
    /// With a fresh token, no client and no watchdog, the daemon's next duty is a refresh minutes
    /// away: its threads should not run meanwhile. libdispatch's pool monitor, once any job ran on
    /// the pool, woke it once a second for ever (6 or more here); Swift's default executor, a
    /// `Task.sleep` or a concurrent queue are enough to start it (docs/performance.md, "At rest").
    @Test("No periodic wake-up: at most 3 context switches in 6 s, with the socket and the proxy on")
    func nothingWakesAtRest() async throws {
        let directory = try scratchDirectory("at-rest")
        try await withDaemon(
            daemon: ["--proxy-listen", directory.appendingPathComponent("proxy.sock").path, "--proxy-upstream", "http://127.0.0.1:9/"]
        ) { _, daemon in
            let pid = daemon.process.processIdentifier
            // What start-up set going settles first (the fetch's connection, idle pool threads).
            try await Task.sleep(for: .seconds(2))
            let before = Self.contextSwitches(pid)
            try await Task.sleep(for: .seconds(6))
            let after = Self.contextSwitches(pid)
            // Threads that ended meanwhile (idle pool threads do) are left out: what wakes
            // periodically lives on.
            let woken = after.byThread.reduce(0) { sum, thread in sum + thread.value - (before.byThread[thread.key] ?? 0) }
            #expect(woken <= 3, "\(woken) context switches in 6 s at rest; by thread: \(Self.difference(before, after))")
        }
    }

    /// The main actor's executor is the daemon's own (`MainThreadExecutor`): the main thread waits
    /// on a futex. libdispatch's `dispatch_main` parked it in `rt_sigsuspend`, after unwinding it
    /// with `pthread_exit`, which loaded `libgcc_s` on the start's path (docs/performance.md, "The
    /// main thread parks without libdispatch").
    @Test("The main thread waits on a futex for the main actor's jobs, not in dispatch_main")
    func mainThreadParksOnAFutex() async throws {
        try await withDaemon { _, daemon in
            let pid = daemon.process.processIdentifier
            #if arch(x86_64)
            let futex = "202"
            #elseif arch(arm64)
            let futex = "98"
            #else
            #error("the futex system call's number on this architecture")
            #endif
            let deadline = ContinuousClock.now + .seconds(10)
            var call = ""
            while ContinuousClock.now < deadline {
                // "NUMBER ARGUMENTS…" while blocked in a system call, "running" or "-1 …" otherwise.
                let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/syscall", encoding: .utf8)
                call = line?.split(separator: " ").first.map(String.init) ?? ""
                if call == futex { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(call == futex, "the main thread is in system call \(call), not futex (\(futex)), 10 s after READY=1")
        }
    }

    struct Switches {
        var byThread: [String: Int] = [:]
    }

    /// Voluntary and involuntary context switches of every thread of `pid`, by "tid name".
    static func contextSwitches(_ pid: Int32) -> Switches {
        var switches = Switches()
        for (tid, lines) in ProcessReadings.threadStatuses(pid) {
            var name = tid
            var count = 0
            for line in lines {
                if line.hasPrefix("Name:") { name = "\(tid) \(line.dropFirst(5).trimmingCharacters(in: .whitespaces))" }
                if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                    count += Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            switches.byThread[name] = count
        }
        return switches
    }

    static func difference(_ before: Switches, _ after: Switches) -> String {
        after.byThread.compactMap { name, count in
            let delta = count - (before.byThread[name] ?? 0)
            return delta == 0 ? nil : "\(name): \(delta)"
        }.sorted().joined(separator: ", ")
    }
}
