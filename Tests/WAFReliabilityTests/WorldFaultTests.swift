import Foundation
import Testing
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits

/// The world around the daemon failing: a full disk, a token service that trickles, a process
/// stopped past a retry's time, a hostile configuration file. Each reports its figure.
@Suite("Reliability: when the world around it fails", .offPool, .serialized, .timeLimit(.minutes(10)))
struct WorldFaultTests {
    @Test(
        "STATE-5: with the token file, the jar and the state file on a full disk the daemon serves from memory; once space comes back every file is written within seconds, not at the next refresh"
    )
    func STATE5_fullDiskHeals() async throws {
        let mount = try scratchDirectory("waf-full-disk")
        // A tmpfs of 64 KiB, filled to the last byte.
        try #require(
            try await run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", mount.path]).status == 0, "mount (root in make test)"
        )
        defer { _ = try? FileManager.default.removeItem(at: mount) }
        let filler = mount.appendingPathComponent("filler").path
        _ = try await run("/usr/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4k"])
        let files = ["token", "cookies.txt", "state/token.json"].map { mount.appendingPathComponent($0).path }
        try FileManager.default.createDirectory(atPath: mount.appendingPathComponent("state").path, withIntermediateDirectories: true)
        do {
            try await withDaemon(
                daemon: [
                    "--sinks-token-file", files[0], "--sinks-cookie-jar", files[1], "--state-directory", mount.appendingPathComponent("state").path,
                ],
                executable: Scale.daemon
            ) { _, daemon in try await Self.heals(daemon, files: files, filler: filler) }
        } catch {
            _ = try? await run("/usr/bin/umount", [mount.path])
            throw error
        }
        _ = try await run("/usr/bin/umount", [mount.path])
    }

    /// The daemon serves from memory while the disk is full, and writes every file soon after
    /// `filler` is removed.
    private static func heals(_ daemon: DaemonProcess, files: [String], filler: String) async throws {
        let token = try await daemon.client.tokenReady(wait: .seconds(10))
        #expect(await eventually { daemon.stderr.contains("not written; trying again") }, "each failed write logged with its path")
        #expect(daemon.stderr.contains("No space left on device") || daemon.stderr.contains("ENOSPC") || daemon.stderr.contains("28"))
        #expect(try await daemon.client.getToken() == token, "served from memory")
        // Full for a while longer: the back-off grows (1 s, 2 s, 4 s …, at most 30 s).
        try await Task.sleep(for: .seconds(Scale.pick(4, full: 70)))
        let missing = files.filter { !FileManager.default.fileExists(atPath: $0) }
        #expect(!missing.isEmpty, "nothing could be written while the disk was full")
        try FileManager.default.removeItem(atPath: filler)
        let clock = ContinuousClock()
        let freed = clock.now
        var healed = false
        while !healed, clock.now - freed < .seconds(40) {
            healed = files.allSatisfy { FileManager.default.fileExists(atPath: $0) }
            if !healed { try await Task.sleep(for: .milliseconds(20)) }
        }
        let took = clock.now - freed
        Scale.report(
            "full disk: \(missing.count) files unwritten while full, all written \(took) after space came back (the longest back-off is 30 s)")
        #expect(healed && took < .seconds(Scale.full ? 31 : 10), "\(took)")
        #expect((try? String(contentsOfFile: files[0], encoding: .utf8)) == token.value)
        #expect(daemon.stderr.contains("written after"), "the recovery is logged")
    }

    @Test("RET-1: against a service that trickles its answer, each attempt ends within tokenService.timeoutSec")
    func RET1_tricklingServiceAttempts() async throws {
        try await withDaemon(
            daemon: ["--token-service-timeout-sec", "2", "--max-retry-count", "0", "--max-error-token-refresh-delay-msec", "30000"],
            executable: Scale.daemon
        ) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            var longest = Duration.zero
            for _ in 0..<Scale.pick(2, full: 5) {
                try await service.arm(FaultRule(kind: .trickle, target: .inputs, count: 1, intervalMilliseconds: 300))
                let clock = ContinuousClock()
                let started = clock.now
                let answer = try await curl(daemon.socketPath, "/v1/refresh?wait=60", ["-X", "POST"])
                longest = max(longest, clock.now - started)
                #expect(answer.code == 503, "allRetriesFailed after the one attempt: \(answer)")
            }
            Scale.report("trickling token service: the longest attempt \(longest) (tokenService.timeoutSec 2; the service would trickle for 300 s)")
            #expect(longest < .seconds(6))
        }
    }

    @Test("TOK-9: a refresh due while the daemon is stopped runs as soon as it continues")
    func TOK9_stoppedPastARetry() async throws {
        try await withDaemon(
            service: ["--fail-next", "1000000"],
            daemon: ["--max-retry-count", "0", "--max-error-token-refresh-delay-msec", "2000", "--refresh-jitter", "false"],
            executable: Scale.daemon
        ) { service, daemon in
            #expect(await eventually { ((try? await service.counters().inputs) ?? 0) >= 2 })
            let before = try await service.counters().inputs
            #expect(await eventually { ((try? await service.counters().inputs) ?? 0) > before })
            let counted = try await service.counters().inputs
            // The attempt the service saw has failed at the daemon too: stopped before that, the
            // daemon schedules the retry only once it continues, two seconds on (once in nine full runs).
            #expect(await eventually { (try? await status(daemon))?["refresh"]?["inFlight"] == .bool(false) }, "the attempt's failure was handled")
            daemon.signal(SIGSTOP)
            try await Task.sleep(for: .seconds(Scale.pick(4, full: 30)))
            let clock = ContinuousClock()
            let continued = clock.now
            daemon.signal(SIGCONT)
            #expect(await eventually(for: .seconds(5)) { ((try? await service.counters().inputs) ?? 0) > counted })
            let late = clock.now - continued
            Scale.report("stopped past a retry's time: the retry ran \(late) after SIGCONT")
            #expect(late < .seconds(1))
        }
    }

    @Test("a hostile configuration file of up to 1 MiB is refused in well under a second")
    func hostileConfiguration() async throws {
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        var slowest = Duration.zero
        for text in [
            String(repeating: "[", count: (1 << 20) - 1), String(repeating: "{a: ", count: 262_000), String(repeating: "- ", count: 500_000),
        ] {
            let file = try scratchDirectory("waf-hostile").appendingPathComponent("hostile.yaml")
            try text.write(to: file, atomically: true, encoding: .utf8)
            let clock = ContinuousClock()
            let started = clock.now
            let checked = try await run(daemon, ["--check-config", "--config", file.path])
            slowest = max(slowest, clock.now - started)
            #expect(checked.status == 78 && checked.stderr.contains("nests deeper than 32 levels"), "\(checked.stderr.prefix(300))")
        }
        Scale.report("hostile configuration (1 MiB of nesting that never closes): refused by --check-config in \(slowest) at most, the whole process")
        #expect(slowest < .seconds(2))
    }
}
