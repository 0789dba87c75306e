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

    @Test(
        "MULTI-2: waf-tokenctl --provider NAME or --domain HOST on every command, waf-tokenctl providers; both, or an unknown one, is a usage error (64)"
    )
    func MULTI2_ctlChoosesAProvider() async throws {
        let ctl = productsDirectory.appendingPathComponent("waf-tokenctl").path
        try await withTwoProviders { _, _, daemon in
            let socket = ["--socket", daemon.socketPath]
            let pay = try await run(ctl, socket + ["--provider", "pay", "token", "--wait", "10"])
            let main = try await run(ctl, socket + ["token", "--wait", "10"])
            #expect(pay.status == 0 && main.status == 0 && pay.stdout != main.stdout)
            #expect(try await run(ctl, ["token", "--domain", "api.pay.example.org"] + socket).stdout == pay.stdout, "after the subcommand too")
            #expect(try await run(ctl, socket + ["--provider", "pay", "cookie"]).stdout == "aws-waf-token=" + pay.stdout)
            let status = try await run(ctl, socket + ["--provider", "pay", "status", "--json"])
            #expect(status.status == 0 && status.stdout.contains(#""provider" : "pay""#), "\(status.stdout)")
            let refreshed = try await run(ctl, socket + ["--provider", "pay", "refresh"])
            #expect(refreshed.status == 0 && refreshed.stdout != pay.stdout)
            let listed = try await run(ctl, socket + ["providers"])
            #expect(
                listed.status == 0 && listed.stdout.hasPrefix("default\t127.0.0.1\tfresh\tscheduled\npay\tpay.example.org\tfresh\t"),
                "\(listed.stdout)")
            #expect(try await run(ctl, socket + ["--provider", "pay", "--domain", "pay.example.org", "token"]).status == 64)
            let unknown = try await run(ctl, socket + ["--provider", "nope", "token"])
            #expect(unknown.status == 64 && unknown.stderr.contains("no such provider"), "\(unknown.stderr)")
        }
    }
}
