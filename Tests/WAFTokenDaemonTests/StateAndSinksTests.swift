import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFTestSupport
import WAFTestTraits

@Suite("Sinks and state", .offPool, .timeLimit(.minutes(2)))
struct StateAndSinksTests {
    @Test("STATE-3: the token file and the cookie jar are rewritten on every token; curl -b with the jar passes the protected resource")
    func STATE3_sinksRewrittenOnEveryToken() async throws {
        let directory = try scratchDirectory("waf-sinks")
        let tokenFile = directory.appendingPathComponent("token").path
        let jar = directory.appendingPathComponent("cookies.txt").path
        // What a writer killed between its temporary file and the rename leaves behind.
        for leftover in [".token.Qw3rTy", ".cookies.txt.Zx9cVb"] {
            try "a whole token".write(to: directory.appendingPathComponent(leftover), atomically: false, encoding: .utf8)
        }
        try "not ours".write(to: directory.appendingPathComponent(".token.keep"), atomically: false, encoding: .utf8)
        try await withDaemon(daemon: ["--sinks-token-file", tokenFile, "--sinks-cookie-jar", jar]) { service, daemon in
            let first = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == first.value })
            // The token file, the jar and the state file are written one after the other.
            #expect(await eventually { (try? String(contentsOfFile: jar, encoding: .utf8))?.contains(first.value) == true })
            let mode = try FileManager.default.attributesOfItem(atPath: tokenFile)[.posixPermissions] as? Int
            #expect(mode == 0o640)
            let line = try #require(try String(contentsOfFile: jar, encoding: .utf8).split(separator: "\n").last)
            let fields = line.split(separator: "\t").map(String.init)
            #expect(fields.count == 7)
            #expect(Array(fields.prefix(4)) == ["127.0.0.1", "FALSE", "/", "FALSE"])
            #expect(fields[5] == "aws-waf-token" && fields[6] == first.value)
            #expect(Int(fields[4]).map { abs(Double($0) - Date().timeIntervalSince1970 - 86400) < 120 } == true, "expires 24 h after the fetch")

            let accepted = try await run(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, service.origin + "/protected/x"])
            #expect(accepted.stdout == "200")
            let refused = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", service.origin + "/protected/x"])
            #expect(refused.stdout == "202")

            let second = try await daemon.client.refresh()
            #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == second.value })
            #expect(await eventually { (try? String(contentsOfFile: jar, encoding: .utf8))?.contains(second.value) == true })
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix(".") }
            #expect(leftovers == [".token.keep"], "an earlier run's temporaries removed, nobody else's files touched: \(leftovers)")
        }
    }

    @Test("STATE-1: a restarted daemon serves a still-fresh saved token at once, without fetching")
    func STATE1_freshSavedTokenServedAtOnce() async throws {
        let service = try ServiceProcess()
        let state = scratchPath("waf-state").path
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
        #expect(await expectNoLeaks(first, service: service) == nil)
        #expect(await expectNoLeaks(second, service: service) == nil)
        await service.stop()
    }

    @Test("STATE-1: an old saved token is loaded as stale and refreshed at once")
    func STATE1_oldSavedTokenRefreshedAtOnce() async throws {
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

    @Test(
        "STATE-2: a damaged, unreadable or non-regular saved token is set aside and the daemon starts without it; a state directory it cannot look into is exit 71"
    )
    func STATE2_damagedStateSetAside() async throws {
        let service = try ServiceProcess()
        let state = try scratchDirectory("waf-state")
        let file = state.appendingPathComponent("token.json")
        try "{ not json".write(to: file, atomically: true, encoding: .utf8)
        let damaged = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state.path])
        _ = try await damaged.client.tokenReady(wait: .seconds(10))
        #expect(damaged.stderr.contains("the saved token is damaged (it is not a saved token); set aside as \(file.path).bad."))
        await damaged.stop()

        for make in ["mkdir", "mkfifo"] {
            try? FileManager.default.removeItem(at: file)
            #expect(try await run("/usr/bin/\(make)", [file.path]).status == 0)
            let daemon = try await DaemonProcess.serving(service: service, arguments: ["--state-directory", state.path])
            #expect(try await daemon.client.tokenReady(wait: .seconds(10)).value.isEmpty == false, "\(make): starts, fetches, serves")
            #expect(daemon.stderr.contains("(it is not a regular file); set aside"), "\(make)")
            await daemon.stop()
        }
        let asides = try FileManager.default.contentsOfDirectory(atPath: state.path).filter { $0.hasPrefix("token.json.bad.") }
        #expect(asides.count >= 1, "kept for inspection: \(asides)")

        // A state directory under a file cannot be looked into at all.
        let blocked = try DaemonProcess(service: service, arguments: ["--state-directory", "/etc/hostname/state"])
        #expect(await blocked.waitForExit() == 71)
        #expect(blocked.stderr.contains("waf-tokend: cannot read the saved token"))
        await blocked.stop()
        await service.stop()
    }

    @Test(
        "STATE-4: a reload to another domain clears the token file, cookie jar and state file at once; then they hold the new identity's token only")
    func STATE4_identityChangeClearsEveryFile() async throws {
        let directory = try scratchDirectory("waf-identity")
        let tokenFile = directory.appendingPathComponent("token").path
        let jar = directory.appendingPathComponent("cookies.txt").path
        let state = directory.appendingPathComponent("state")
        let service = try ServiceProcess(["--token-domain", "other.example.org"])
        func config(_ domain: String) -> String {
            "applicationIntegrationUrl: \(service.url)\ndomainName: \(domain)\nsinks:\n  tokenFile: \(tokenFile)\n  cookieJar: \(jar)\nstateDirectory: \(state.path)\n"
        }
        let daemon = try await DaemonProcess.serving(service: nil, configFile: config("127.0.0.1"))
        let first = try await daemon.client.tokenReady(wait: .seconds(10))
        #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == first.value })
        // Hold the next fetch, so that the moment between the drop and the new token can be seen.
        try await service.setLatency(milliseconds: 3000)
        try config("other.example.org").write(toFile: daemon.directory.appendingPathComponent("daemon.yaml").path, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        // Removed one after the other, before the new identity's fetch can store anything.
        #expect(
            await eventually {
                [tokenFile, jar, state.appendingPathComponent("token.json").path].allSatisfy { !FileManager.default.fileExists(atPath: $0) }
            }, "the old token is gone from the token file, the jar and the state file")
        // Memory is the reload's next step after the files (Reloader.commit, steps 1 and 2): a read
        // in between may still see the old token, one after it must not.
        #expect(await eventually(for: .seconds(2)) { (try? await curl(daemon.socketPath, "/v1/token").code) == 503 }, "and from memory")
        let second = try await daemon.client.tokenReady(wait: .seconds(20))
        #expect(second.value != first.value)
        #expect(await eventually { (try? String(contentsOfFile: tokenFile, encoding: .utf8)) == second.value })
        let saved = state.appendingPathComponent("token.json").path
        func record() -> JSONValue? { FileManager.default.contents(atPath: saved).flatMap { JSONValue.parse(Array($0)) } }
        #expect(await eventually { record()?["value"]?.string == second.value })
        #expect(record()?["domainName"]?.string == "other.example.org")
        await daemon.stop()
        #expect(await expectNoLeaks(daemon, service: service) == nil)
        await service.stop()
    }
}
