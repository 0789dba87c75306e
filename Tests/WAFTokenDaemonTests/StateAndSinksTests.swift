import Foundation
import Testing
import WAFChallenge
import WAFTestSupport

@Suite("Sinks and state", .timeLimit(.minutes(2)))
struct StateAndSinksTests {
    @Test("the token file and the cookie jar are rewritten on every token; curl -b with the jar passes the protected resource")
    func sinks() async throws {
        let directory = try scratchDirectory("waf-sinks")
        let tokenFile = directory.appendingPathComponent("token").path
        let jar = directory.appendingPathComponent("cookies.txt").path
        try await withDaemon(daemon: ["--sinks-token-file", tokenFile, "--sinks-cookie-jar", jar]) { service, daemon in
            let first = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == first.value })
            let mode = try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int
            #expect(mode == 0o640)
            let line = try #require(try String(contentsOfFile: jar, encoding: .utf8).split(separator: "\n").last)
            let fields = line.split(separator: "\t").map(String.init)
            #expect(fields.count == 7)
            #expect(Array(fields.prefix(4)) == ["127.0.0.1", "FALSE", "/", "FALSE"])
            #expect(fields[5] == "aws-waf-token" && fields[6] == first.value)
            #expect(Int(fields[4]).map { abs(Double($0) - Date().timeIntervalSince1970 - 86400) < 120 } == true, "expires 24 h after the fetch")

            let accepted = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, service.origin + "/protected/x"])
            #expect(accepted.stdout == "200")
            let refused = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", service.origin + "/protected/x"])
            #expect(refused.stdout == "202")

            let second = try await daemon.client.refresh()
            #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == second.value })
            #expect(await eventually { (try? String(contentsOfFile: jar, encoding: .utf8))?.contains(second.value) == true })
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") }
            #expect(leftovers.isEmpty, "no temporary files left behind: \(leftovers)")
        }
    }

    @Test("a restarted daemon serves a still-fresh saved token at once, without fetching")
    func restartWithFreshState() async throws {
        let service = try ServiceProcess()
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("waf-state-\(UUID().uuidString.prefix(8))").path
        let first = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state])
        let token = try await first.client.tokenReady(wait: .seconds(10))
        await first.stop()
        let mode = try FileManager.default.attributesOfItem(atPath: state + "/token.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let fetchesBefore = try await service.counters().inputs

        let second = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state])
        let served = try #require(try await second.client.getToken())
        #expect(served.value == token.value)
        #expect(served.stale == false)
        #expect(try await service.counters().inputs == fetchesBefore, "no fetch for a fresh saved token")
        await second.stop()
        await expectNoLeaks(first, service: service)
        await expectNoLeaks(second, service: service)
        await service.stop()
    }

    @Test("an old saved token is loaded as stale and refreshed at once")
    func restartWithOldState() async throws {
        // Every fetch fails until the test lifts the fault: the old token is all there is while it
        // is checked, however slowly this machine gets there.
        let service = try ServiceProcess(["--fail-next", "1000000", "--fault-target", "inputs"])
        let state = try scratchDirectory("waf-state")
        let old = "00000000-0000-4000-8000-000000000000:AAAAAAAAAAAAAAAA:b2xk"
        let record = """
            {"applicationIntegrationUrl":"\(service.url.dropLast())","domainName":"127.0.0.1","fetchedAt":"2020-01-01T00:00:00Z","value":"\(old)"}
            """
        try record.write(to: state.appendingPathComponent("token.json"), atomically: true, encoding: .utf8)
        let daemon = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state.path])
        let served = try #require(try await daemon.client.getToken())
        #expect(served.value == old)
        #expect(served.stale == true)
        #expect(await eventually { (try? await service.counters().inputs).map { $0 >= 1 } == true }, "refreshed at once")
        try await service.reset()
        let fresh = try await daemon.client.tokenReady(wait: .seconds(20))
        #expect(fresh.value != old)
        await daemon.stop()
        #expect(daemon.leaked([old]).isEmpty)
        await service.stop()
    }

    @Test("a damaged saved token is set aside; an unreadable one stops the start with exit 71")
    func damagedState() async throws {
        let service = try ServiceProcess()
        let state = try scratchDirectory("waf-state")
        try "{ not json".write(to: state.appendingPathComponent("token.json"), atomically: true, encoding: .utf8)
        let daemon = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state.path])
        _ = try await daemon.client.tokenReady(wait: .seconds(10))
        #expect(daemon.stderr.contains("the saved token is damaged"))
        await daemon.stop()

        // A directory where the file should be cannot be read at all.
        try FileManager.default.removeItem(at: state.appendingPathComponent("token.json"))
        try FileManager.default.createDirectory(at: state.appendingPathComponent("token.json"), withIntermediateDirectories: true)
        let unreadable = try DaemonProcess(service: service, arguments: ["--state-directory", state.path])
        #expect(await unreadable.waitForExit() == 71)
        #expect(unreadable.stderr.contains("waf-tokend: cannot read the saved token"))
        await unreadable.stop()
        await service.stop()
    }
}

@Suite("Exit codes", .timeLimit(.minutes(2)))
struct ExitCodeTests {
    @Test("78 for an invalid configuration, with one clear line and every problem")
    func invalidConfiguration() async throws {
        let daemon = try DaemonProcess(
            service: nil,
            arguments: ["--application-integration-url", "http://example.com/a/b/", "--domain-name", "co.uk", "--max-retry-count", "11"])
        #expect(await daemon.waitForExit() == 78)
        let lines = daemon.stderr.split(separator: "\n")
        #expect(lines.first == "waf-tokend: invalid configuration (3 problems):")
        #expect(lines.dropFirst().map { $0.trimmingCharacters(in: .whitespaces).prefix { $0 != ":" } } == ["applicationIntegrationUrl", "domainName", "maxRetryCount"])
        await daemon.stop()
    }

    @Test("--check-config prints the effective configuration and exits 0, or every problem and 78; paths need not exist")
    func checkConfig() async throws {
        let good = try await run(productsDirectory.appendingPathComponent("waf-tokend").path, [
            "--check-config", "--config", "/dev/null", "--application-integration-url", "https://x.example.com/a/b/",
            "--domain-name", "example.com", "--socket-path", "/nonexistent/dir/token.sock", "--state-directory", "/nonexistent/state",
        ])
        #expect(good.status == 0)
        #expect(good.stdout.contains("domainName: example.com\n"))
        #expect(good.stdout.contains("  path: /nonexistent/dir/token.sock\n"))
        let bad = try await run(productsDirectory.appendingPathComponent("waf-tokend").path, [
            "--check-config", "--config", "/dev/null", "--domain-name", "com", "--token-refresh-delay-sec", "1000",
        ])
        #expect(bad.status == 78)
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.contains("applicationIntegrationUrl: is required"))
        #expect(bad.stderr.contains(#"domainName: "com" is a public suffix"#))
        #expect(bad.stderr.contains("tokenRefreshDelaySec: 1000 is out of range"))
    }

    @Test("71 when the socket is served by a live daemon or the path is not a socket; a stale socket is replaced")
    func socketPath() async throws {
        let service = try ServiceProcess()
        let first = try await DaemonProcess.serving(service: service)
        let second = try DaemonProcess(service: service, replacing: DaemonProcess.arguments(service: service, socket: first.socketPath))
        #expect(await second.waitForExit() == 71)
        #expect(second.stderr.contains("is in use by a running daemon"))
        await second.stop()
        #expect(try await curl(first.socketPath, "/healthz").code == 200, "the live daemon keeps its socket")

        // A crash leaves the socket file behind: the next start replaces it.
        first.signal(SIGKILL)
        _ = await first.waitForExit()
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let third = try await DaemonProcess.serving(service: service, directory: first.directory)
        #expect(third.socketPath == first.socketPath)
        await third.stop()

        let file = first.directory.appendingPathComponent("plain-file").path
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let fourth = try DaemonProcess(service: service, replacing: DaemonProcess.arguments(service: service, socket: file))
        #expect(await fourth.waitForExit() == 71)
        #expect(fourth.stderr.contains("exists and is not a socket"))
        await fourth.stop()
        await first.stop()
        await service.stop()
    }

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
