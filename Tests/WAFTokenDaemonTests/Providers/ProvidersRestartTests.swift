import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@Suite("Several providers: restarts keep every provider's files", .offPool, .timeLimit(.minutes(2)))
struct ProvidersRestartTests {
    @Test(
        "MULTI-4, STATE-1: restarted again and again, or added back by a reload, every provider is restored from its own state file and no provider's files are removed while another's are written"
    )
    func MULTI4_restartsKeepEveryProvidersFiles() async throws {
        let directory = try scratchDirectory("waf-providers-restart")
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let first = try ServiceProcess(), second = try ServiceProcess(["--token-domain", "pay.example.org"])
        let common = "sinks:\n  tokenFile: \(path("main.token"))\n  cookieJar: \(path("jar.txt"))\nstateDirectory: \(path("state"))\n"
        let file = twoProvidersFile(first: first, second: second) + "    sinks:\n      tokenFile: \(path("pay.token"))\n" + common
        var daemon = try await DaemonProcess.serving(service: nil, configFile: file)
        let main = try #require(try await ProvidersSocketTests.value(daemon))
        let pay = try #require(try await ProvidersSocketTests.value(daemon, "&provider=pay"))
        let settled = {
            (try? String(contentsOfFile: path("main.token"), encoding: .utf8)) == main
                && (try? String(contentsOfFile: path("pay.token"), encoding: .utf8)) == pay
                && ((try? String(contentsOfFile: path("jar.txt"), encoding: .utf8)) ?? "").contains(main)
                && ((try? String(contentsOfFile: path("jar.txt"), encoding: .utf8)) ?? "").contains(pay)
                && Set((try? FileManager.default.contentsOfDirectory(atPath: path("state"))) ?? []) == ["token.json", "token.pay.json"]
        }
        #expect(await eventually(settled), "both tokens in their files, the jar and the state directory")
        await daemon.stop()

        // Each restart restores both without a fetch; the first provider to report must not clear
        // the other's files (it did: every path was brought to the records so far, and the other
        // had none yet, so its state file was removed and the next restart fetched).
        for restart in 1...2 {
            let before = (try await first.counters().inputs, try await second.counters().inputs)
            daemon = try await DaemonProcess.serving(service: nil, configFile: file)
            #expect(try await ProvidersSocketTests.value(daemon) == main, "restart \(restart): default restored")
            #expect(try await ProvidersSocketTests.value(daemon, "&provider=pay") == pay, "restart \(restart): pay restored")
            try await Task.sleep(for: .milliseconds(500))
            #expect(settled(), "restart \(restart): every file as it was")
            let after = (try await first.counters().inputs, try await second.counters().inputs)
            #expect(after == before, "restart \(restart): nothing fetched")
            await daemon.stop()
        }

        // Started without pay, then pay added back by a reload: its state file is its token, and
        // its token file (removed meanwhile) holds it again: the record the provider made while
        // the reload was prepared, before storage knew it, is not lost.
        let withoutPay = try #require(file.range(of: "providers:")).lowerBound
        daemon = try await DaemonProcess.serving(service: nil, configFile: String(file[..<withoutPay]) + common)
        try FileManager.default.removeItem(atPath: path("pay.token"))
        try file.write(toFile: daemon.directory.appendingPathComponent("daemon.yaml").path, atomically: true, encoding: .utf8)
        let before = try await second.counters().inputs
        daemon.signal(SIGHUP)
        #expect(await eventually { (try? await ProvidersSocketTests.value(daemon, "&provider=pay")) == pay }, "pay restored by the reload")
        try await Task.sleep(for: .milliseconds(500))
        #expect(FileManager.default.fileExists(atPath: path("state/token.pay.json")), "its state file kept")
        #expect(await eventually { (try? String(contentsOfFile: path("pay.token"), encoding: .utf8)) == pay }, "its token file written")
        #expect(try await second.counters().inputs == before, "nothing fetched for it")
        await daemon.stop()
        await first.stop()
        await second.stop()
    }
}
