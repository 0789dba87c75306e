import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// The project installed with `scripts/install.sh` (the units, the sysusers and tmpfiles snippets,
/// man pages, and the debug build `make test` made: the static release build is tested the same
/// way, as a package, by `make test-packages`) into a Debian container booted with systemd as PID
/// 1, and driven with `systemctl` and `journalctl` as an operator would. The debug binaries find
/// the Swift runtime where they were linked against it, bound read-only into the container.
@Suite("under a real systemd in a container", .offPool, .timeLimit(.minutes(10)))
struct NspawnTests {
    @Test(
        "systemd: active (running) with STATUS, a client gets a token, reload, watchdog restart, socket activation, journal fields, nothing left behind"
    )
    func endToEnd() async throws {
        let build = repositoryDirectory.appendingPathComponent(".build/debug")
        let manual = build.appendingPathComponent("generate-manual")
        try #require(
            FileManager.default.isExecutableFile(atPath: manual.path),
            "no \(manual.path): run the tests with `make test`, which builds it (swift test holds the build folder, so this test cannot)")
        let runtime = try #require(
            try await Self.swiftRuntime(of: build.appendingPathComponent("waf-tokend")), "the debug daemon names no Swift runtime")

        let id = "waf-e2e-\(UUID().uuidString.prefix(8).lowercased())"
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(id)
        let stage = scratch.appendingPathComponent("stage")
        try FileManager.default.createDirectory(at: stage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let install = try await run(
            "/usr/bin/env",
            [
                "DESTDIR=\(stage.path)", "BIN=\(build.path)", "MANUAL=\(manual.path)",
                repositoryDirectory.appendingPathComponent("scripts/install.sh").path,
            ],
            timeout: .seconds(600))
        try #require(install.status == 0, "scripts/install.sh: \(install.stderr)")

        let root = try await Container.root(in: repositoryDirectory.appendingPathComponent(".build/nspawn"))
        let hostRunBefore = try FileManager.default.contentsOfDirectory(atPath: "/run").sorted()
        let service = try ServiceProcess()  // on the host's loopback, which the container shares
        let container = try await Container(
            root: root, name: id, bindings: [(stage.path, "/mnt/stage"), (build.path, "/mnt/stage-wedge"), (runtime, runtime)],
            log: scratch.appendingPathComponent("nspawn.log").path)
        do {
            try await exercise(container, service: service)
        } catch {
            Issue.record(error)
        }
        let journal = try? await container.sh("journalctl -o json --no-pager", timeout: .seconds(60))

        #expect(await container.powerOff() == 0, "the container shuts down cleanly")
        #expect(try FileManager.default.contentsOfDirectory(atPath: "/run").sorted() == hostRunBefore, "nothing written to the host's /run")
        #expect(container.cgroups.allSatisfy { !FileManager.default.fileExists(atPath: $0) }, "the container's cgroups are gone")
        let minted = try await service.mintedTokens()
        #expect(!minted.isEmpty)
        #expect(minted.allSatisfy { !(journal?.stdout ?? "").contains($0) }, "no token value anywhere in the container's journal")
        await service.stop()
    }

    private func exercise(_ container: Container, service: ServiceProcess) async throws {
        // Installed as a package would be: files, users, runtime directory, configuration.
        let setup = try await container.sh(
            """
            set -e
            cp -a /mnt/stage/. /
            systemd-sysusers
            systemd-tmpfiles --create waf-tokend.conf
            printf 'applicationIntegrationUrl: %s\\ndomainName: 127.0.0.1\\n' '\(service.url)' > /etc/waf-tokend/waf-tokend.yaml
            systemctl daemon-reload
            """)
        try #require(setup.status == 0, "\(setup.stderr)")

        // Type=notify: start returns once the daemon said READY=1.
        let start = try await container.sh("systemctl start waf-tokend.service", timeout: .seconds(90))
        let startLog = start.status == 0 ? "" : (try await container.sh("journalctl -u waf-tokend --no-pager | tail -20")).stdout
        try #require(start.status == 0, "\(start.stderr) \(startLog)")
        #expect(
            await eventually(for: .seconds(30)) {
                let shown = await properties(container, "ActiveState", "SubState", "StatusText")
                return shown["ActiveState"] == "active" && shown["SubState"] == "running"
                    && shown["StatusText"]?.hasPrefix("token fresh (age ") == true
            }, "active (running) with a STATUS line")
        let status = try await container.sh("systemctl status waf-tokend --no-pager")
        #expect(status.stdout.contains("Active: active (running)") && status.stdout.contains("Status: \"token fresh"), "\(status.stdout)")

        // A client in the container gets a token the local token service accepts.
        let token = try await container.sh("waf-tokenctl token --wait 20")
        #expect(token.status == 0, "\(token.stderr)")
        let value = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await service.protected(header: value).status == 200)
        // The socket file decides who may connect: members of waf-token, not others.
        let member = try await container.sh("setpriv --reuid=nobody --regid=waf-token --clear-groups waf-tokenctl token")
        #expect(member.status == 0 && member.stdout.hasPrefix(value), "a waf-token member: \(member.stderr)")
        let stranger = try await container.sh("setpriv --reuid=nobody --regid=nogroup --clear-groups waf-tokenctl token")
        #expect(stranger.status != 0 && stranger.stdout.isEmpty, "a non-member is kept out by the socket's mode")

        // systemctl reload: SIGHUP, RELOADING=1 then READY=1; no restart.
        let reload = try await container.sh("systemctl reload waf-tokend", timeout: .seconds(60))
        let reloadLog = reload.status == 0 ? "" : (try await container.sh("journalctl -u waf-tokend --no-pager | tail -20")).stdout
        #expect(reload.status == 0, "\(reload.stderr) \(reloadLog)")  // ExecReload on a system without procps
        #expect(
            await eventually { (try? await container.sh("journalctl -u waf-tokend --no-pager"))?.stdout.contains("configuration reloaded") == true })
        let afterReload = await properties(container, "ActiveState", "NRestarts")
        #expect(afterReload["ActiveState"] == "active" && afterReload["NRestarts"] == "0", "\(afterReload)")

        // The watchdog: the test build whose provider wedges on purpose (waf-tokend-wedge, never
        // installed by the package) in place of the daemon; the pings stop, systemd restarts it.
        let wedge = try await container.sh(
            """
            set -e
            mkdir -p /run/systemd/system/waf-tokend.service.d
            printf '[Service]\\nExecStart=\\nExecStart=/mnt/stage-wedge/waf-tokend-wedge --config /etc/waf-tokend/waf-tokend.yaml\\nEnvironment=WAF_TOKEND_WEDGE_AFTER_SEC=1\\nWatchdogSec=3\\nLimitCORE=0\\n' \
                > /run/systemd/system/waf-tokend.service.d/wedge.conf
            systemctl daemon-reload
            systemctl restart waf-tokend.service
            """, timeout: .seconds(90))
        #expect(wedge.status == 0, "\(wedge.stderr)")
        #expect(
            await eventually(for: .seconds(60)) {
                (try? await container.sh("journalctl -u waf-tokend --no-pager"))?.stdout.contains("Watchdog timeout") == true
            }, "systemd saw the watchdog time out")
        #expect(
            await eventually(for: .seconds(60)) {
                await properties(container, "NRestarts")["NRestarts"].flatMap { Int($0) }.map { $0 >= 1 } == true
            }, "and restarted the service")
        let unwedge = try await container.sh(
            """
            rm -rf /run/systemd/system/waf-tokend.service.d && systemctl daemon-reload && systemctl restart waf-tokend.service
            """, timeout: .seconds(90))
        #expect(unwedge.status == 0, "\(unwedge.stderr)")
        #expect(try await container.sh("systemctl is-active waf-tokend.service").stdout.hasPrefix("active"))

        // Socket activation: systemd holds the socket; the first connection starts the service.
        let handOver = try await container.sh("systemctl stop waf-tokend.service && systemctl start waf-tokend.socket", timeout: .seconds(60))
        #expect(handOver.status == 0, "\(handOver.stderr)")
        #expect(try await container.sh("systemctl is-active waf-tokend.service").stdout.hasPrefix("inactive"))
        let activated = try await container.sh("waf-tokenctl token --wait 20", timeout: .seconds(60))
        #expect(activated.status == 0 && !activated.stdout.isEmpty, "\(activated.stderr)")
        #expect(try await container.sh("systemctl is-active waf-tokend.service").stdout.hasPrefix("active"))

        // journald: native entries with the structured fields.
        let entries = try await container.sh("journalctl -u waf-tokend -o json --no-pager").stdout
            .split(separator: "\n").compactMap { JSONValue.parse(Array($0.utf8)) }
            .filter { $0["SYSLOG_IDENTIFIER"] == .string("waf-tokend") }
        #expect(entries.contains { $0["MESSAGE"] == .string("serving the token API") && $0["ACTIVATED"] == .string("true") }, "the activated start")
        let fetched = try #require(entries.first { $0["MESSAGE"] == .string("token fetched") })
        #expect(fetched["_TRANSPORT"] == .string("journal") && fetched["PRIORITY"] == .string("6"))
        #expect(fetched["CODE_FILE"]?.string?.hasSuffix(".swift") == true && fetched["CODE_LINE"] != nil && fetched["CODE_FUNC"] != nil)
        #expect(fetched["TOKEN_FINGERPRINT"]?.string?.count == 8)
        // The sandbox denies setpriority; libdispatch would log each refusal (see the unit).
        #expect(!entries.contains { $0["MESSAGE"]?.string?.contains("Failed to set thread priority") == true }, "no libdispatch noise")
    }

    /// `systemctl show -p …` of waf-tokend.service, as a dictionary.
    private func properties(_ container: Container, _ names: String...) async -> [String: String] {
        let shown = try? await container.sh("systemctl show waf-tokend.service " + names.map { "-p \($0)" }.joined(separator: " "))
        return Dictionary(
            (shown?.stdout ?? "").split(separator: "\n").compactMap { line in
                let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            }, uniquingKeysWith: { _, last in last })
    }

    /// The directory of the Swift runtime a dynamically linked binary finds first (its RUNPATH).
    static func swiftRuntime(of binary: URL) async throws -> String? {
        let dynamic = try await run("/usr/bin/readelf", ["-d", binary.path])
        guard let line = dynamic.stdout.split(separator: "\n").first(where: { $0.contains("(RUNPATH)") }),
            let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]")
        else { return nil }
        return line[line.index(after: open)..<close].split(separator: ":").map(String.init).first { $0.hasSuffix("/lib/swift/linux") }
    }
}
