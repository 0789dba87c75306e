import Foundation
import Testing
import WAFChallenge
import WAFTestSupport
import WAFTestTraits

@Suite("Signals", .offPool, .timeLimit(.minutes(2)))
struct SignalTests {
    @Test("SIGUSR1 foreground, SIGUSR2 background, SIGUSR2 again closed (LIFE rules)")
    func lifecycleSignals() async throws {
        try await withDaemon { (_, daemon) async throws in
            daemon.signal(SIGUSR2)
            #expect(await lifecycleBecomes(daemon, "background"))
            daemon.signal(SIGUSR2)
            #expect(await lifecycleBecomes(daemon, "closed"))
            daemon.signal(SIGUSR1)
            #expect(await lifecycleBecomes(daemon, "foreground"))
            #expect(try await status(daemon)["lifecycle"]?["active"] == .bool(true))
        }
    }

    @Test("SIGHUP reloads a valid file: the new settings apply without a restart")
    func reloadGood() async throws {
        let service = try ServiceProcess()
        let config = "applicationIntegrationUrl: \(service.url)\ndomainName: 127.0.0.1\nlifecycle:\n  platform: ios\n"
        try await withDaemon(configFile: config) { _, daemon in
            let before = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(try await status(daemon)["lifecycle"]?["profile"] == .string("ios"))
            let file = daemon.directory.appendingPathComponent("daemon.yaml")
            try (config.replacingOccurrences(of: "platform: ios", with: "platform: android") + "tokenCookiePath: /api\n")
                .write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await eventually { (try? await status(daemon))?["lifecycle"]?["profile"] == .string("android") })
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=/").code == 404, "the cookie moved to /api")
            #expect(try await curl(daemon.socketPath, "/v1/cookie?path=/api/x").code == 200)
            #expect(try await daemon.client.getToken()?.value == before.value, "same web ACL and domain: the token stays")
            #expect(try await curl(daemon.socketPath, "/metrics").body.contains(#"waf_tokend_reloads_total{result="success"} 1"#))
        }
        await service.stop()
    }

    @Test("SIGHUP with an invalid file: refused, logged with key and value, the old configuration kept")
    func reloadBad() async throws {
        let service = try ServiceProcess()
        let config = "applicationIntegrationUrl: \(service.url)\ndomainName: 127.0.0.1\nmaxRetryCount: 2\n"
        try await withDaemon(configFile: config) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let file = daemon.directory.appendingPathComponent("daemon.yaml")
            try (config.replacingOccurrences(of: "maxRetryCount: 2", with: "maxRetryCount: 99") + "lifecycle:\n  platform: android\n")
                .write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await eventually { daemon.stderr.contains("reload refused") })
            #expect(daemon.stderr.contains("maxRetryCount: 99 is out of range"))
            #expect(try await status(daemon)["lifecycle"]?["profile"] == .string("ios"))
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
            #expect(try await curl(daemon.socketPath, "/metrics").body.contains(#"waf_tokend_reloads_total{result="failure"} 1"#))
        }
        await service.stop()
    }

    @Test("SIGTERM and SIGINT stop gracefully: exit 0, the socket file removed", arguments: [SIGTERM, SIGINT])
    func gracefulStop(signal: Int32) async throws {
        let service = try ServiceProcess()
        let daemon = try await DaemonProcess.serving(service: service)
        _ = try await daemon.client.tokenReady(wait: .seconds(10))
        daemon.signal(signal)
        #expect(await daemon.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        #expect(daemon.stderr.contains("stopping"))
        #expect(await expectNoLeaks(daemon, service: service) == nil)
        await daemon.stop()
        await service.stop()
    }

    /// The socket accepts before the service group runs: SIGTERM and SIGINT are armed with the
    /// other signals, before it accepts, not by the group (whose handlers came later, so that a
    /// SIGTERM sent at once found the default action and killed the daemon).
    @Test(
        "SIGTERM sent the moment the socket first accepts a connection stops gracefully, no READY=1 after STOPPING=1, and a second one changes nothing"
    )
    func stopAsSoonAsSeen() async throws {
        let service = try ServiceProcess()
        for _ in 0..<3 {
            let notify = try NotifySocket(abstract: false)
            defer { notify.close() }
            let daemon = try DaemonProcess(service: service, environment: ["NOTIFY_SOCKET": notify.address])
            let deadline = ContinuousClock.now + .seconds(20)
            while (try? RawSocket(path: daemon.socketPath)) == nil {
                guard daemon.process.isRunning, ContinuousClock.now < deadline else {
                    Issue.record("the socket did not accept within 20 s: \(daemon.stderr)")
                    await daemon.stop()
                    await service.stop()
                    return
                }
            }
            daemon.signal(SIGTERM)
            // The second once the stop is under way (two sent at once are one pending signal).
            #expect(await notify.wait { $0.fields["STOPPING"] == "1" } != nil, "STOPPING=1 within 20 s")
            if daemon.process.isRunning { daemon.signal(SIGTERM) }
            #expect(await daemon.waitForExit() == 0, "stopped gracefully, not by SIGTERM's default action (143)")
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            let stopping = try #require(notify.messages.firstIndex { $0.fields["STOPPING"] == "1" })
            #expect(notify.messages[stopping...].allSatisfy { $0.fields["READY"] == nil }, "nothing claims readiness after STOPPING")
            await daemon.stop()
        }
        await service.stop()
    }

    /// The configuration is read before the signals are armed (on the main thread, while NIO's
    /// loops are made): SIGHUP, SIGUSR1 and SIGUSR2 must be ignored by then, or their default
    /// action ends the daemon (docs/running.md). The read is held open by a FIFO as the proxy's
    /// credentials file, which the configuration's check opens and waits on for a writer.
    @Test("SIGHUP, SIGUSR1 and SIGUSR2 while the configuration is read are ignored, not the daemon's end")
    func ignoredWhileTheConfigurationIsRead() async throws {
        let directory = try scratchDirectory("signals-while-reading")
        let fifo = directory.appendingPathComponent("credentials").path
        try #require(mkfifo(fifo, 0o600) == 0)
        let daemon = try DaemonProcess(
            service: nil,
            arguments: [
                "--application-integration-url", "https://example.com/x/", "--domain-name", "example.com", "--egress-proxy", "http://127.0.0.1:9",
                "--egress-proxy-credentials-file", fifo,
            ])
        let pid = daemon.process.processIdentifier
        let deadline = ContinuousClock.now + .seconds(20)
        while (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) != "wait_for_partner" {
            guard daemon.process.isRunning, ContinuousClock.now < deadline else {
                Issue.record("the start did not wait on the credentials file within 20 s: \(daemon.stderr)")
                await daemon.stop()
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        for signal in [SIGHUP, SIGUSR1, SIGUSR2] { daemon.signal(signal) }
        try await Task.sleep(for: .milliseconds(200))
        // A writer lets the read go on; a FIFO is no regular file, so the configuration is refused.
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        defer { if writer >= 0 { close(writer) } }
        #expect(writer >= 0, "the FIFO's reader is gone: \(daemon.stderr)")
        #expect(
            await daemon.waitForExit() == 78,
            "ended by the configuration's refusal (78), not by a signal's default action (129, 138, 140): \(daemon.stderr)")
    }

    @Test("a storm of thousands of signals leaves the state right and never two fetches in flight")
    func signalStorm() async throws {
        // Slow answers make overlapping fetches visible to the service's in-flight count.
        try await withDaemon(service: ["--latency-ms", "20"], daemon: ["--lifecycle-platform", "ios"]) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let pid = daemon.process.processIdentifier
            // Refreshes on the socket at the same time, so that fetches are wanted throughout.
            let refreshes = Task {
                for _ in 0..<20 { _ = try? await daemon.client.refresh(wait: .seconds(5)) }
            }
            for index in 0..<3000 {
                kill(pid, index % 3 == 0 ? SIGUSR1 : SIGUSR2)
                if index % 100 == 0 { await Task.yield() }
            }
            await refreshes.value
            #expect(daemon.process.isRunning)
            // After the storm the signals still mean what they say.
            daemon.signal(SIGUSR1)
            #expect(await lifecycleBecomes(daemon, "foreground"))
            daemon.signal(SIGUSR2)
            #expect(await lifecycleBecomes(daemon, "background"))
            daemon.signal(SIGUSR2)
            #expect(await lifecycleBecomes(daemon, "closed"))
            let counters = try await service.counters()
            #expect(counters.maxCallsInFlight == 1, "TOK-4: one fetch at a time")
            #expect(counters.tokensIssued >= 2)
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
        }
    }
}
