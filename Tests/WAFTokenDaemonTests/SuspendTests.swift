import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@Suite("Time the process does not run (TOK-9)", .offPool, .timeLimit(.minutes(2)))
struct SuspendTests {
    @Test("TOK-9: a retry whose time passes while the daemon is stopped runs within 1 s of SIGCONT; its timers wait on CLOCK_BOOTTIME")
    func TOK9_stoppedDaemonRetriesOnContinuing() async throws {
        // Every attempt fails; after the first, attempts come every 3 s (the error phase, no jitter).
        try await withDaemon(
            service: ["--fail-next", "1000"],
            daemon: ["--max-retry-count", "0", "--max-error-token-refresh-delay-msec", "3000", "--refresh-jitter", "false"]
        ) { service, daemon in
            let pid = daemon.process.processIdentifier
            // The provider's timers: a timerfd of clock 7, CLOCK_BOOTTIME, which counts a machine's sleep.
            #expect(Self.timerClocks(pid).contains(7), "timerfd clocks: \(Self.timerClocks(pid))")

            #expect(await eventually { ((try? await service.counters().inputs) ?? 0) >= 2 }, "the error phase has begun")
            let before = try await service.counters().inputs
            #expect(await eventually { ((try? await service.counters().inputs) ?? 0) > before }, "an attempt just happened")
            // Its failure handled, and so the next attempt's timer armed, before the stop: stopped
            // while the answer was on its way, the daemon would arm it only after SIGCONT, 3 s on
            // (one run in ten under the repeated suite did).
            #expect(await eventually { (try? await status(daemon))?["refresh"]?["inFlight"] == .bool(false) }, "the attempt's failure was handled")
            let counted = try await service.counters().inputs
            // Stopped for 5 s: the next attempt, due 3 s after the last, falls due meanwhile.
            daemon.signal(SIGSTOP)
            try await Task.sleep(for: .seconds(5))
            #expect(try await service.counters().inputs == counted, "nothing while stopped")
            let continued = ContinuousClock.now
            daemon.signal(SIGCONT)
            #expect(await eventually(for: .seconds(5)) { ((try? await service.counters().inputs) ?? 0) > counted })
            let late = ContinuousClock.now - continued
            #expect(late < .seconds(1), "the due attempt ran \(late) after SIGCONT")
        }
    }

    /// The clock ids of the timerfds `pid` holds, from /proc/PID/fdinfo.
    static func timerClocks(_ pid: Int32) -> [Int] {
        let directory = "/proc/\(pid)/fdinfo"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.compactMap { entry in
            guard let info = try? String(contentsOfFile: "\(directory)/\(entry)", encoding: .utf8),
                let line = info.split(separator: "\n").first(where: { $0.hasPrefix("clockid:") })
            else { return nil }
            return Int(line.dropFirst("clockid:".count).trimmingCharacters(in: .whitespaces))
        }
    }
}
