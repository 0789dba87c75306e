import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// EXEC-5: exec runs the provider it wraps and no other; its child's whole group ends with it.
@Suite("waf-tokend exec: its provider, its child's group", .offPool, .timeLimit(.minutes(2)))
struct ExecScopeTests {
    @Test("EXEC5: exec --provider default runs that provider only: pay, in the same configuration, is not fetched and its token file not written")
    func EXEC5_onlyItsProvider() async throws {
        let first = try ServiceProcess()
        let second = try ServiceProcess()
        let directory = try scratchDirectory("waf-exec-scope")
        let payFile = directory.path + "/pay.token"
        let config = directory.path + "/config.yaml"
        // pay answers for the same host as default, so that its fetches would succeed were it run.
        let yaml = """
            applicationIntegrationUrl: \(first.url)
            domainName: 127.0.0.1
            providers:
              pay:
                applicationIntegrationUrl: \(second.url)
                domainName: 127.0.0.1
                sinks:
                  tokenFile: \(payFile)

            """
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let supervisor = try SpawnedProcess(
            daemon,
            [
                "exec", "--config", config, "--provider", "default", "--", "/bin/sh", "-c",
                "cat \"$WAF_TOKEN_FILE\" > \(directory.path)/read; sleep 3",
            ],
            output: directory.path + "/stdout.log", errors: directory.path + "/stderr.log")
        #expect(await supervisor.waitForExit(timeout: .seconds(30)) == 0)
        let read = (try? String(contentsOfFile: directory.path + "/read", encoding: .utf8)) ?? ""
        #expect(try await first.mintedTokens().contains(read), "the child got default's token")
        #expect(try await second.counters().tokensIssued == 0, "pay was never fetched")
        #expect(!FileManager.default.fileExists(atPath: payFile), "pay's token file was never written, for a child of the same uid to read")
        await first.stop()
        await second.stop()
    }

    @Test(
        "EXEC5: --on-token restart ends the old child's whole group (a grandchild that ignores SIGTERM too) before the new child starts; the stop ends the last"
    )
    func EXEC5_restartEndsTheGroup() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-exec-group")
        let socket = directory.path + "/token.sock"
        let marker = "641.\(getpid())"
        defer { for pid in ProcessGroupTests.running(marker) { kill(pid, SIGKILL) } }
        // Each child leaves a grandchild in its group that ignores SIGTERM, and ends on SIGTERM. It
        // logs its start only once its trap is set: a SIGTERM before the trap would end it with 143.
        let child = "trap 'exit 0' TERM; (trap '' TERM; sleep \(marker)) & echo start >> \(directory.path)/log; while :; do sleep 0.05; done"
        let supervisor = try ExecTests.exec(service, directory, socket: socket, ["--on-token", "restart"], ["/bin/sh", "-c", child])
        let starts = { ((try? String(contentsOfFile: directory.path + "/log", encoding: .utf8)) ?? "").split(separator: "\n").count }
        #expect(await eventually(for: .seconds(20)) { starts() == 1 && ProcessGroupTests.running(marker).count == 1 }, "started")
        #expect(try await curl(socket, "/v1/refresh", ["-X", "POST"]).code == 200)
        #expect(await eventually(for: .seconds(30)) { starts() == 2 }, "restarted")
        #expect(
            await eventually(for: .seconds(30)) { ProcessGroupTests.running(marker).count == 1 },
            "the first child's grandchild was ended with its group; the second's runs: \(ProcessGroupTests.running(marker))")
        supervisor.signal(SIGTERM)
        #expect(await supervisor.waitForExit(timeout: .seconds(30)) == 0)
        #expect(ProcessGroupTests.running(marker).isEmpty, "nothing outlives exec: \(ProcessGroupTests.running(marker))")
        await service.stop()
    }
}
