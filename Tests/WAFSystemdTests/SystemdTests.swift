import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFSystemd
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

private func monotonicMicroseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
}

/// systemd integration without a service manager: the notify protocol over a test-owned socket,
/// the watchdog, journald in a private mount namespace, and the unit files through systemd-analyze
/// (socket activation: SocketActivationTests).
@Suite("systemd integration", .offPool, .timeLimit(.minutes(3)))
struct SystemdTests {
    @Test("sd_notify: READY, STATUS, RELOADING with MONOTONIC_USEC then READY, STOPPING, in order", arguments: [false, true])
    func notifyProtocol(abstract: Bool) async throws {
        let notify = try NotifySocket(abstract: abstract)
        try await withDaemon(environment: ["NOTIFY_SOCKET": notify.address]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let ready = try #require(await notify.wait { $0.fields["READY"] == "1" })
            #expect(await notify.wait { $0.fields["STATUS"]?.hasPrefix("token fresh (age ") == true } != nil)
            let status = try #require(notify.messages.last { $0.fields["STATUS"] != nil }?.fields["STATUS"])
            #expect(status.contains("foreground") && status.contains("next refresh in"), "\(status)")

            let before = monotonicMicroseconds()
            daemon.signal(SIGHUP)
            let reloading = try #require(await notify.wait { $0.fields["RELOADING"] == "1" })
            let stamp = try #require(reloading.fields["MONOTONIC_USEC"].flatMap { Int64($0) })
            #expect(stamp >= before && stamp <= monotonicMicroseconds(), "MONOTONIC_USEC is CLOCK_MONOTONIC")
            let readyAgain = try #require(await notify.wait { $0.fields["READY"] == "1" && $0.at > reloading.at })
            #expect(readyAgain.at > ready.at)

            daemon.signal(SIGUSR2)
            #expect(await notify.wait { $0.fields["STATUS"]?.contains("background") == true } != nil, "STATUS after every state change")
            let exit = await daemon.stop()
            #expect(exit == 0, "exit \(exit.map(String.init) ?? "none within 20 s"); the daemon's log ends: \(daemon.stderr.suffix(3000))")
            // The datagram was sent before the exit; the reader may take a moment to have it.
            #expect(await notify.wait { $0.fields["STOPPING"] == "1" } != nil)
            let stopping = try #require(notify.messages.firstIndex { $0.fields["STOPPING"] == "1" })
            #expect(notify.messages[stopping...].allSatisfy { $0.fields["READY"] == nil }, "nothing claims readiness after STOPPING")
        }
        notify.close()
    }

    @Test("a failing start says why: STATUS (and ERRNO) before exit 78 or 71")
    func failingStartNotifies() async throws {
        let notify = try NotifySocket(abstract: false)
        let daemon = try DaemonProcess(service: nil, arguments: ["--domain-name", "co.uk"], environment: ["NOTIFY_SOCKET": notify.address])
        #expect(await daemon.waitForExit() == 78)
        let status = await notify.wait { $0.fields["STATUS"] != nil }
        #expect(status?.fields["STATUS"]?.hasPrefix("invalid configuration") == true)
        await daemon.stop()
        notify.close()
    }

    @Test("the watchdog is pinged at half its interval while the provider answers, and not once it is wedged")
    func watchdog() async throws {
        let notify = try NotifySocket(abstract: false)
        // WATCHDOG_USEC 2 s: a ping each second; the wedge comes 4 s after the first token.
        try await withDaemon(
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "2000000", "WAF_TOKEND_WEDGE_AFTER_SEC": "4"],
            executable: "waf-tokend-wedge"
        ) { _, daemon in
            // No request before the wedge: a slow test would meet a wedged provider and wait in vain.
            #expect(await eventually(for: .seconds(30)) { daemon.stderr.contains("wedging the provider's state context") })
            let wedgedAt = ContinuousClock.now
            try await Task.sleep(for: .seconds(3))
            let pings = notify.messages.filter { $0.fields["WATCHDOG"] == "1" }.map(\.at)
            let beforeWedge = pings.filter { $0 < wedgedAt }
            #expect(beforeWedge.count >= 3, "pinged each second while healthy (\(beforeWedge.count) pings)")
            let gaps = zip(beforeWedge.dropFirst(), beforeWedge).map { $0 - $1 }
            #expect(gaps.allSatisfy { $0 < .seconds(2) }, "never a gap as long as WATCHDOG_USEC: \(gaps)")
            // One ping may have been on its way as the queue wedged; after that, silence.
            #expect(pings.filter { $0 > wedgedAt + .milliseconds(300) }.isEmpty, "the pings stop once the provider is wedged")
            #expect(try await curl(daemon.socketPath, "/healthz").code == 503, "/healthz sees it too")
            daemon.signal(SIGKILL)
        }
        notify.close()
    }

    @Test("a wedged provider does not hold the stop up: SIGTERM ends the daemon within the providers' 5 s limit, with exit 1 and why")
    func wedgedProviderStop() async throws {
        try await withWedgedDaemon { daemon in
            let stopped = ContinuousClock.now
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: .seconds(30)) == 1, "a stop that left a provider behind is a failure")
            #expect(ContinuousClock.now - stopped < .seconds(15), "the stop took \(ContinuousClock.now - stopped)")
            #expect(daemon.stderr.contains("a provider did not stop within 5"), "the log says why: \(daemon.stderr.suffix(600))")
        }
    }

    @Test("a reload held by a wedged provider does not hold the stop up: SIGTERM still ends the daemon, with exit 1")
    func reloadHeldByAWedgedProvider() async throws {
        try await withWedgedDaemon { daemon in
            // The reload asks the wedged provider for its state, and never gets an answer.
            daemon.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(300))
            let stopped = ContinuousClock.now
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: .seconds(40)) == 1, "the stop ended, a failure")
            #expect(ContinuousClock.now - stopped < .seconds(25), "the stop took \(ContinuousClock.now - stopped)")
            #expect(daemon.stderr.contains("a reload did not end within 2"), "the log says why: \(daemon.stderr.suffix(600))")
        }
    }

    /// `body` with waf-tokend-wedge, its provider's state queue wedged a second after the first
    /// token (the watchdog's probe does it, so the watchdog is on).
    func withWedgedDaemon(_ body: (DaemonProcess) async throws -> Void) async throws {
        let notify = try NotifySocket(abstract: false)
        try await withDaemon(
            environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "2000000", "WAF_TOKEND_WEDGE_AFTER_SEC": "1"],
            executable: "waf-tokend-wedge"
        ) { _, daemon in
            #expect(await eventually(for: .seconds(30)) { daemon.stderr.contains("wedging the provider's state context") })
            try await Task.sleep(for: .milliseconds(300))
            try await body(daemon)
        }
        notify.close()
    }

    @Test("a watchdog meant for another process (WATCHDOG_PID) is not pinged")
    func watchdogForAnotherProcess() async throws {
        let notify = try NotifySocket(abstract: false)
        try await withDaemon(environment: ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await notify.wait { $0.fields["READY"] == "1" } != nil)
            try await Task.sleep(for: .seconds(1))
            #expect(notify.messages.allSatisfy { $0.fields["WATCHDOG"] == nil })
        }
        notify.close()
    }

    @Test("readiness.waitForToken: EXTEND_TIMEOUT_USEC while waiting, READY=1 once a token is cached")
    func readyAfterFirstToken() async throws {
        try await withDaemonWaitingForToken { notify, service, daemon in
            let extend = try #require(await notify.wait { $0.fields["EXTEND_TIMEOUT_USEC"] != nil })
            #expect(extend.fields["EXTEND_TIMEOUT_USEC"] == "30000000")
            #expect(await notify.wait { $0.fields["STATUS"] == "waiting for the first token" } != nil)
            #expect(await eventually { (try? await service.counters().inputs).map { $0 >= 3 } == true }, "fetches fail")
            #expect(try await curl(daemon.socketPath, "/readyz").code == 503)
            #expect(notify.messages.allSatisfy { $0.fields["READY"] == nil }, "not ready before the first token")
            try await service.reset()
            let ready = try #require(await notify.wait { $0.fields["READY"] == "1" })
            #expect(ready.at > extend.at)
            #expect(try await daemon.client.getToken() != nil)
        }
    }

    /// While `readiness.waitForToken` waits, a SIGHUP applies (the configuration may be why no
    /// token comes) but tells systemd nothing: a reload's READY=1 before the start's would end the
    /// start too early. After it, a reload tells RELOADING=1 and READY=1 again.
    @Test("A SIGHUP before READY=1 reloads without RELOADING=1 or READY=1; after it, with both")
    func hangUpBeforeReady() async throws {
        try await withDaemonWaitingForToken { notify, service, daemon in
            #expect(await notify.wait { $0.fields["STATUS"] == "waiting for the first token" } != nil)
            daemon.signal(SIGHUP)
            #expect(await eventually { daemon.stderr.contains("configuration reloaded") }, "the reload applies while the start waits")
            #expect(notify.messages.allSatisfy { $0.fields["READY"] == nil && $0.fields["RELOADING"] == nil }, "and tells nothing")
            try await service.reset()
            let ready = try #require(await notify.wait { $0.fields["READY"] == "1" })
            daemon.signal(SIGHUP)
            let reloading = try #require(await notify.wait { $0.fields["RELOADING"] == "1" }, "a reload after READY=1 tells it")
            #expect(reloading.at > ready.at)
            #expect(await notify.wait { $0.fields["READY"] == "1" && $0.at > reloading.at } != nil)
        }
    }

    /// A daemon with `readiness.waitForToken` whose token service fails every fetch until the test
    /// lifts the fault (`service.reset()`): no token, so no READY, however long it takes.
    private func withDaemonWaitingForToken(_ body: (NotifySocket, ServiceProcess, DaemonProcess) async throws -> Void) async throws {
        let notify = try NotifySocket(abstract: true)
        defer { notify.close() }
        try await withDaemon(
            service: ["--fail-next", "1000000", "--fault-target", "inputs"],
            daemon: ["--readiness-wait-for-token", "true"],
            environment: ["NOTIFY_SOCKET": notify.address]
        ) { service, daemon in try await body(notify, service, daemon) }
    }

    @Test(
        "MULTI-9: with several providers READY=1 waits for every first token, STATUS= sums them up, and the watchdog stops when any one provider wedges"
    )
    func MULTI9_everyProviderUnderSystemd() async throws {
        let notify = try NotifySocket(abstract: true)
        // pay's service fails until the test lifts the fault: default has its token, pay none.
        try await withTwoProviders(
            arguments: ["--readiness-wait-for-token", "true"], environment: ["NOTIFY_SOCKET": notify.address],
            secondService: ["--fail-next", "1000000", "--fault-target", "inputs"]
        ) { _, second, daemon in
            #expect(await notify.wait { $0.fields["STATUS"] == "waiting for the first token" } != nil)
            #expect(await eventually { (try? await second.counters().inputs).map { $0 >= 3 } == true }, "pay's fetches fail")
            // Its first fetch may still be under way when pay's three have failed (a loaded machine).
            #expect(await eventually { (try? await curl(daemon.socketPath, "/v1/token"))?.code == 200 }, "default has its token")
            #expect(notify.messages.allSatisfy { $0.fields["READY"] == nil }, "not ready while pay has none")
            #expect(try await curl(daemon.socketPath, "/readyz").code == 503)
            try await second.reset()
            #expect(await notify.wait { $0.fields["READY"] == "1" } != nil)
            let line = await notify.wait { $0.fields["STATUS"]?.hasPrefix("2 providers, 2 with a fresh token") == true }
            #expect(line != nil, "\(notify.messages.compactMap { $0.fields["STATUS"] })")
        }
        notify.close()
        let watchdog = try NotifySocket(abstract: false)
        try await withTwoProviders(
            environment: [
                "NOTIFY_SOCKET": watchdog.address, "WATCHDOG_USEC": "2000000", "WAF_TOKEND_WEDGE_AFTER_SEC": "2",
                "WAF_TOKEND_WEDGE_DOMAIN": "pay.example.org",
            ],
            executable: "waf-tokend-wedge"
        ) { _, _, daemon in
            #expect(await eventually(for: .seconds(30)) { daemon.stderr.contains("wedging the provider's state context") })
            let wedgedAt = ContinuousClock.now
            try await Task.sleep(for: .seconds(3))
            let pings = watchdog.messages.filter { $0.fields["WATCHDOG"] == "1" }.map(\.at)
            #expect(pings.contains { $0 < wedgedAt }, "pinged while both answered")
            #expect(pings.filter { $0 > wedgedAt + .milliseconds(300) }.isEmpty, "no ping once one provider is wedged")
            #expect(try await curl(daemon.socketPath, "/v1/token").code == 200, "the other provider still serves")
            daemon.signal(SIGKILL)
        }
        watchdog.close()
    }

    @Test("journald: structured entries with MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_*, metadata fields, and no token; libsystemd not loaded")
    func journal() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-journal")
        let socket = directory.appendingPathComponent("token.sock").path
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        // systemd sets JOURNAL_STREAM to stderr's device and inode; systemd-cat does not, so the
        // wrapper does it the same way.
        let script = """
            set -e
            mount -t tmpfs tmpfs /run
            mkdir -p /run/systemd/journal /run/log/journal
            /lib/systemd/systemd-journald >/dev/null 2>&1 &
            journald=$!
            for i in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
            # LD_DEBUG: the loader's report of what it loaded goes to stderr, so to the journal too.
            LD_DEBUG=files systemd-cat -t waf-tokend-stderr sh -c 'export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2); exec "$0" "$@"' \
                \(daemon) --config /dev/null --application-integration-url \(service.url) --domain-name 127.0.0.1 \
                --socket-path \(socket) &
            for i in $(seq 200); do curl -s --max-time 5 --unix-socket \(socket) 'http://localhost/v1/token?wait=10' -o /dev/null && break; sleep 0.05; done
            curl -s --unix-socket \(socket) -X POST http://localhost/v1/refresh -o /dev/null
            # The daemon alone: this script's own command line holds the same words.
            pkill -TERM -f "^\(daemon) .*socket-path \(socket)"
            sleep 1
            journalctl --directory /run/log/journal -o json --no-pager
            kill $journald
            """
        let result = try await run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/usr/bin/bash", "-c", script])
        let entries = result.stdout.split(separator: "\n").compactMap { JSONValue.parse(Array($0.utf8)) }
        let ours = entries.filter { $0["SYSLOG_IDENTIFIER"] == .string("waf-tokend") }
        #expect(ours.count >= 3, "entries: \(entries.count), status \(result.status), stdout: \(result.stdout.prefix(500)), stderr: \(result.stderr)")
        let fetched = try #require(ours.first { $0["MESSAGE"] == .string("token fetched") })
        #expect(fetched["PRIORITY"] == .string("6"))
        #expect(fetched["CODE_FILE"]?.string?.hasSuffix("ProviderDriver.swift") == true)
        #expect(fetched["CODE_LINE"]?.string.flatMap { Int($0) } != nil)
        #expect(fetched["CODE_FUNC"]?.string?.isEmpty == false)
        #expect(fetched["TOKEN_FINGERPRINT"]?.string?.count == 8)
        #expect(fetched["_TRANSPORT"] == .string("journal"), "written natively, not as stderr lines")
        #expect(result.stdout.contains("libc.so.6"), "the loader's report reached the journal")
        #expect(!result.stdout.contains("libsystemd.so.0"), "the journal's protocol spoken, not libsystemd loaded for it")
        #expect(ours.contains { $0["MESSAGE"] == .string("stopped") })
        let minted = try await service.mintedTokens()
        #expect(minted.count >= 2)
        #expect(minted.allSatisfy { !result.stdout.contains($0) }, "no token value in the journal")
        await service.stop()
    }

    @Test("the unit files pass systemd-analyze verify, and the service rates at most 1.0 on security")
    func unitFiles() async throws {
        let directory = try scratchDirectory("waf-units")
        // verify wants the executable to exist: point the copy at the one just built.
        let service = try String(contentsOf: repositoryDirectory.appendingPathComponent("systemd/waf-tokend.service"), encoding: .utf8)
            .replacingOccurrences(of: "/usr/sbin/waf-tokend", with: productsDirectory.appendingPathComponent("waf-tokend").path)
        try service.write(to: directory.appendingPathComponent("waf-tokend.service"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(
            at: repositoryDirectory.appendingPathComponent("systemd/waf-tokend.socket"), to: directory.appendingPathComponent("waf-tokend.socket"))
        let verify = try await run(
            "/usr/bin/systemd-analyze",
            [
                "verify", "--man=no", directory.appendingPathComponent("waf-tokend.service").path,
                directory.appendingPathComponent("waf-tokend.socket").path,
            ])
        #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr)")

        let security = try await run(
            "/usr/bin/systemd-analyze", ["security", "--offline=yes", repositoryDirectory.appendingPathComponent("systemd/waf-tokend.service").path])
        let line = try #require(security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") })
        let score = try #require(line.split(separator: " ").compactMap { Double($0) }.first)
        #expect(score <= 1.0, "\(line)")
        let units = try await run(
            "/usr/bin/systemd-analyze",
            ["security", "--offline=yes", "--threshold=10", repositoryDirectory.appendingPathComponent("systemd/waf-tokend.service").path])
        #expect(units.status == 0)
    }

    @Test("journal field names: upper case, [A-Z0-9_], never a leading underscore or digit")
    func journalFieldNames() {
        #expect(JournalLogHandler.fieldName("token.fingerprint") == "TOKEN_FINGERPRINT")
        #expect(JournalLogHandler.fieldName("_private") == "PRIVATE")
        #expect(JournalLogHandler.fieldName("9lives") == "F_9LIVES")
        #expect(JournalLogHandler.fieldName("consecutive_failures") == "CONSECUTIVE_FAILURES")
        #expect(JournalLogHandler.fieldName("ünïcode-key") == "_N_CODE_KEY".drop { $0 == "_" }.description)
        #expect(JournalLogHandler.fieldName("___") == nil)
        #expect(JournalLogHandler.fieldName(String(repeating: "a", count: 100))?.count == 64)
    }
}
