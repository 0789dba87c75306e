import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@Suite("waf-tokenctl", .offPool, .timeLimit(.minutes(2)))
struct TokenCtlTests {
    @Test("waf-tokenctl: the token alone on stdout, 69 without token or daemon, 64 for usage errors")
    func ctlExitCodes() async throws {
        let ctl = productsDirectory.appendingPathComponent("waf-tokenctl").path
        try await withDaemon { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let printed = try await run(ctl, ["--socket", daemon.socketPath, "token"])
            #expect(printed.status == 0 && printed.stdout == token.value + "\n" && printed.stderr.isEmpty)
            let after = try await run(ctl, ["token", "--socket", daemon.socketPath])
            #expect(after.stdout == token.value + "\n")
            let viaEnvironment = try await run("/usr/bin/env", ["WAF_TOKEND_SOCKET=\(daemon.socketPath)", ctl, "status"])
            #expect(viaEnvironment.status == 0 && viaEnvironment.stdout.contains("lifecycle: foreground"))
            #expect(try await run(ctl, ["--socket", daemon.socketPath, "lifecycle", "sideways"]).status == 64)
            #expect(try await run(ctl, ["--socket", daemon.socketPath, "bogus"]).status == 64)
            #expect(try await run(ctl, ["--socket", daemon.socketPath, "health"]).status == 0)
        }
        try await withDaemon(service: ["--stall-next", "1", "--fault-target", "inputs"], daemon: ["--token-service-timeout-sec", "60"]) { _, daemon in
            let none = try await run(ctl, ["--socket", daemon.socketPath, "token"])
            #expect(none.status == 69 && none.stdout.isEmpty && none.stderr.contains("noToken"))
        }
        let unreachable = try await run(ctl, ["--socket", "/nonexistent/token.sock", "token"])
        #expect(unreachable.status == 69 && unreachable.stderr.contains("cannot reach waf-tokend"))
    }
}
