import Foundation
import Testing
import WAFJSON
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// The package under a real systemd, restarted and upgraded while consumers use it: the promise of
/// docs/systemd.md, "Restarts that consumers do not see". The API socket and a proxy's socket are
/// held by socket units; the load comes from the host (scripts/restart-load.py) through the
/// container's /run, as `/proc/<its PID 1>/root/run/...`.
@Suite("Restarts under load", .offPool, .serialized, .timeLimit(.minutes(15)))
struct RestartTests {
    static let restarts = 10

    @Test("ten systemctl restarts and a package upgrade under load on the API socket and a socket-activated proxy: no request fails, no fetch")
    func restartsUnderLoad() async throws {
        let version = try Packaging.packageVersion()
        let first = Packaging.deb(version), second = Packaging.deb(version + "+upgrade1")
        try #require(FileManager.default.fileExists(atPath: first.path), "run make deb first (make test-packages does)")
        try #require(FileManager.default.fileExists(atPath: second.path), "run DEB_VERSION=\(version)+upgrade1 scripts/deb.sh first")
        // Tokens good for an hour at the upstream: a challenge, and the fetch it brings, would only
        // come from a daemon that lost its token.
        let service = try ServiceProcess(["--immunity-seconds", "3600"])
        let root = try await Container.root(in: repositoryDirectory.appendingPathComponent(".build/nspawn"))
        let scratch = try scratchDirectory("waf-restart-test")
        let container = try await Container(
            root: root, name: "waf-restart-\(getpid())", bindings: [(first.deletingLastPathComponent().path, "/mnt/out")],
            log: scratch.appendingPathComponent("nspawn.log").path)
        do {
            try await exercise(container, service: service, scratch: scratch, upgrade: second.lastPathComponent, first: first.lastPathComponent)
        } catch {
            Issue.record(error)
        }
        #expect(await container.powerOff() == 0)
        await service.stop()
    }

    /// `{"reset": 2}` as "reset 2", nothing as "none".
    static func kinds(_ value: JSONValue?) -> String {
        guard case .object(let kinds)? = value, !kinds.isEmpty else { return "none" }
        return kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.integer ?? 0)" }.joined(separator: ", ")
    }

    static func number(_ value: JSONValue?) -> Double { if case .number(let number)? = value { number } else { -1 } }

    private func exercise(_ container: Container, service: ServiceProcess, scratch: URL, upgrade: String, first: String) async throws {
        func sh(_ script: String) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await container.sh(script, timeout: .seconds(120))
        }
        let install = try await sh("dpkg -i /mnt/out/\(first)")
        try #require(install.status == 0, "\(install.stdout)\(install.stderr)")
        // The operator's part: a token service, a proxy whose socket a socket unit holds, and the
        // drop-in that hands that socket to the service (docs/systemd.md).
        let configure = try await sh(
            """
            set -e
            cat > /etc/waf-tokend/waf-tokend.yaml <<'EOF'
            applicationIntegrationUrl: \(service.url)
            domainName: 127.0.0.1
            tokenRefreshDelaySec: 600
            proxy:
              listen: /run/waf-tokend/proxy-default.sock
              upstream: \(service.origin)
            EOF
            mkdir -p /etc/systemd/system/waf-tokend.service.d
            printf '[Service]\\nSockets=waf-tokend.socket waf-tokend-proxy@default.socket\\n' > /etc/systemd/system/waf-tokend.service.d/proxy-socket.conf
            systemctl daemon-reload
            # A socket unit does not start while its service runs: this once, the service stops.
            systemctl stop waf-tokend.service
            systemctl enable --now waf-tokend-proxy@default.socket
            systemctl start waf-tokend.service
            """)
        let configureLog = configure.status == 0 ? "" : try await sh("journalctl --no-pager -n 30 -o cat").stdout
        try #require(configure.status == 0, "\(configure.stdout)\(configure.stderr)\(configureLog)")
        let token = try await sh("waf-tokenctl token --wait 20")
        try #require(token.status == 0, "\(token.stderr)")

        let run = "/proc/\(container.leader)/root/run/waf-tokend"
        let proxied = try await runDetached(
            "/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "--unix-socket", "\(run)/proxy-default.sock", "http://localhost/protected/x"])
        let proxyLog = proxied.stdout.hasSuffix("\n200") ? "" : try await sh("journalctl -u waf-tokend --no-pager -n 20 -o cat").stdout
        try #require(proxied.stdout.hasSuffix("\n200"), "the proxy answers on the socket its socket unit holds: \(proxied.stdout) \(proxyLog)")
        let journal = try await sh("journalctl -u waf-tokend --no-pager -o json")
        #expect(journal.stdout.contains("\"ACTIVATED\":\"true\""), "the daemon took the sockets systemd passed")
        #expect(!journal.stdout.contains("matches no configured listener"), "both passed sockets were claimed")

        let fetchedBefore = try await service.counters().tokensIssued
        let output = scratch.appendingPathComponent("load.json").path
        let load = try SpawnedProcess(
            "/usr/bin/python3",
            [
                repositoryDirectory.appendingPathComponent("scripts/restart-load.py").path,
                "--target", "api=\(run)/token.sock:/v1/token", "--target", "proxy=\(run)/proxy-default.sock:/protected/x",
            ], output: output, errors: scratch.appendingPathComponent("load.log").path)
        try await Task.sleep(for: .seconds(2))
        var pids: Set<String> = [try await sh("systemctl show -p MainPID --value waf-tokend").stdout]
        for _ in 0..<Self.restarts {
            let restart = try await sh("systemctl restart waf-tokend.service")
            #expect(restart.status == 0, "\(restart.stderr)")
            pids.insert(try await sh("systemctl show -p MainPID --value waf-tokend").stdout)
            // systemd refuses a sixth start within 10 s (StartLimitBurst=5): a crash loop's guard.
            try await Task.sleep(for: .milliseconds(2500))
        }
        let upgraded = try await sh("dpkg -i /mnt/out/\(upgrade)")
        #expect(upgraded.status == 0, "\(upgraded.stdout)\(upgraded.stderr)")
        pids.insert(try await sh("systemctl show -p MainPID --value waf-tokend").stdout)
        try await Task.sleep(for: .seconds(2))
        load.signal(SIGTERM)
        #expect(await load.waitForExit(timeout: .seconds(60)) == 0, "the load generator ends")
        let fetched = try await service.counters().tokensIssued - fetchedBefore

        let summary = try #require(json(try String(contentsOfFile: output, encoding: .utf8)), "the load generator's summary")
        let requests = summary["requests"]?.integer ?? 0
        let failed = summary["failed"]?.integer ?? -1
        let targets: [String: JSONValue] = if case .object(let object)? = summary["targets"] { object } else { [:] }
        let kinds = targets.sorted { $0.key < $1.key }.map { name, figures in
            "\(name) \(figures["requests"]?.integer ?? 0) requests, failures \(Self.kinds(figures["failures"])), longest wait \(Self.number(figures["longestWaitMs"])) ms"
        }
        print(
            "restarts under load: \(Self.restarts) restarts and 1 upgrade (\(pids.count) daemons), \(requests) requests, \(failed) failed, longest wait \(Self.number(summary["longestWaitMs"])) ms, \(fetched) fetches; \(kinds.joined(separator: "; "))"
        )
        #expect(pids.count == Self.restarts + 2, "every restart and the upgrade started a new daemon: \(pids)")
        #expect(requests > 1000, "steady load")
        #expect(failed == 0, "\(summary)")
        #expect(fetched == 0, "the restarted daemons served the saved token")
        #expect(try await sh("dpkg-query -W -f '${Version}' waf-tokend").stdout.hasSuffix("+upgrade1"))
    }
}
