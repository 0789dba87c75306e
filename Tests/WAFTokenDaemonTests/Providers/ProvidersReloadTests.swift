import Foundation
import Testing
import WAFJSON
import WAFTestSupport
import WAFTestTraits

@Suite("Several providers: reload and lifecycle", .offPool, .timeLimit(.minutes(2)))
struct ProvidersReloadTests {
    @Test(
        "MULTI-6, MULTI-9: a reload adds a provider (in the app's lifecycle state: nothing fetched in the background), removes one (its token gone from memory, token file, jar and state file, its proxy socket gone), and an invalid set is refused whole"
    )
    func MULTI6_reloadAddsAndRemoves() async throws {
        let directory = try scratchDirectory("waf-providers-reload")
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let first = try ServiceProcess(), second = try ServiceProcess(["--token-domain", "pay.example.org"])
        let third = try ServiceProcess(["--token-domain", "shop.example.org"])
        let common = "sinks:\n  cookieJar: \(path("jar.txt"))\nstateDirectory: \(path("state"))\n"
        let pay =
            "    sinks:\n      tokenFile: \(path("pay.token"))\n    proxy:\n      listen: \(path("pay.sock"))\n      upstream: \(second.origin)\n"
        let shop = "  shop:\n    applicationIntegrationUrl: \(third.url)\n    domainName: shop.example.org\n"
        let initial = twoProvidersFile(first: first, second: second) + pay + common
        let daemon = try await DaemonProcess.serving(service: nil, configFile: initial)
        let file = daemon.directory.appendingPathComponent("daemon.yaml").path
        let payToken = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay").body)?["value"]?.string)
        _ = try await curl(daemon.socketPath, "/v1/token?wait=10")
        #expect(
            await eventually {
                FileManager.default.fileExists(atPath: path("pay.token")) && FileManager.default.fileExists(atPath: path("state/token.pay.json"))
            })
        #expect(FileManager.default.fileExists(atPath: path("pay.sock")))

        // The app goes to the background; a provider added now starts there and fetches nothing.
        daemon.signal(SIGUSR2)
        #expect(await lifecycleBecomes(daemon, "background"))
        try (twoProvidersFile(first: first, second: second) + pay + shop + common).write(toFile: file, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        #expect(
            await eventually {
                (try? await curl(daemon.socketPath, "/v1/status?provider=shop")).flatMap { json($0.body) }?["lifecycle"]?["state"]?.string
                    == "background"
            })
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await third.counters().inputs == 0, "LIFE-2: no fetch of its own while the app is inactive")
        // Back to the foreground: every provider, the added one too.
        daemon.signal(SIGUSR1)
        #expect(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=shop").code == 200)
        let lifecycles = json(try await curl(daemon.socketPath, "/v1/providers").body)?["providers"]
        if case .array(let items)? = lifecycles { #expect(items.allSatisfy { $0["lifecycle"]?["state"]?.string == "foreground" }, "\(items)") }

        // An invalid set (shop with default's identity) is refused whole: shop keeps running.
        let valid = try String(contentsOfFile: file, encoding: .utf8)
        try valid.replacingOccurrences(of: "domainName: shop.example.org", with: "domainName: 127.0.0.1")
            .replacingOccurrences(of: third.url, with: first.url).write(toFile: file, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        #expect(await eventually { daemon.stderr.contains("reload refused") && daemon.stderr.contains("identity of provider default") })
        #expect(try await curl(daemon.socketPath, "/v1/token?provider=shop").code == 200)

        // pay removed: its token leaves memory and every file at once; its proxy socket goes.
        let removed = valid.replacingOccurrences(
            of: "  pay:\n    applicationIntegrationUrl: \(second.url)\n    domainName: pay.example.org\n" + pay, with: "")
        #expect(removed != valid)
        try removed.write(toFile: file, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        #expect(await eventually(for: .seconds(10)) { (try? await curl(daemon.socketPath, "/v1/token?provider=pay"))?.code == 404 })
        try await Task.sleep(for: .seconds(1))
        #expect(!FileManager.default.fileExists(atPath: path("pay.token")) && !FileManager.default.fileExists(atPath: path("state/token.pay.json")))
        #expect(!((try? String(contentsOfFile: path("jar.txt"), encoding: .utf8)) ?? "").contains(payToken), "its cookie left the jar")
        #expect(!FileManager.default.fileExists(atPath: path("pay.sock")), "its proxy socket is gone")
        #expect(!(try await curl(daemon.socketPath, "/metrics").body.contains(#"provider="pay""#)), "and its metrics")
        #expect(try await curl(daemon.socketPath, "/v1/token?provider=shop").code == 200)
        #expect(try await curl(daemon.socketPath, "/v1/token").code == 200)
        await daemon.stop()
        for service in [first, second, third] { await service.stop() }
    }
}
