import Foundation
import Testing
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// The Debian package in a real systemd (systemd-nspawn on a debootstrap root): install, upgrade,
/// remove, purge, as an operator would.
@Suite("Debian package", .offPool, .serialized)
struct DebianPackageTests {
    @Test("install → active and serving; upgrade → conffile, state and token kept, restarted; remove → stopped, socket gone; purge → all gone")
    func lifecycle() async throws {
        let version = try Packaging.packageVersion()
        let first = Packaging.deb(version), second = Packaging.deb(version + "+upgrade1")
        try #require(FileManager.default.fileExists(atPath: first.path), "run make deb first (make test-packages does)")
        try #require(FileManager.default.fileExists(atPath: second.path), "run DEB_VERSION=\(version)+upgrade1 scripts/deb.sh first")
        let service = try ServiceProcess()
        let root = try await Container.root(in: repositoryDirectory.appendingPathComponent(".build/nspawn"))
        let scratch = try scratchDirectory("waf-deb-test")
        let container = try await Container(
            root: root, name: "waf-deb-\(getpid())", bindings: [(first.deletingLastPathComponent().path, "/mnt/out")],
            log: scratch.appendingPathComponent("nspawn.log").path)
        do {
            try await exercise(container, service: service, version: version, first: first, second: second)
        } catch {
            Issue.record(error)
        }
        #expect(await container.powerOff() == 0)
        await service.stop()
    }

    private func exercise(_ container: Container, service: ServiceProcess, version: String, first: URL, second: URL) async throws {
        func sh(_ script: String) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await container.sh(script, timeout: .seconds(120))
        }
        func property(_ name: String, _ unit: String = "waf-tokend.service") async throws -> String {
            try await sh("systemctl show -p \(name) --value \(unit)").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        // Install: the package enables and starts the socket and the service.
        let install = try await sh("dpkg -i /mnt/out/\(first.lastPathComponent)")
        try #require(install.status == 0, "\(install.stdout)\(install.stderr)")
        // dpkg returns when the start jobs are queued; a unit may still be on its way.
        func becomesActive(_ unit: String) async throws -> Bool {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if try await property("ActiveState", unit) == "active" { return true }
                try await Task.sleep(for: .milliseconds(100))
            }
            return false
        }
        let socketActive = try await becomesActive("waf-tokend.socket")
        let units = try await sh("systemctl status --no-pager waf-tokend.socket waf-tokend.service").stdout
        #expect(socketActive, "\(units)")
        #expect(try await becomesActive("waf-tokend.service"), "\(units)")
        #expect(try await sh("id waf-tokend && getent group waf-token").status == 0, "the system user and group exist")
        #expect(try await sh("waf-tokend --version").stdout.hasPrefix(version))
        #expect(try await sh("man -w waf-tokend 2>/dev/null || test -e /usr/share/man/man1/waf-tokend.1.gz").status == 0)
        // The operator points it at a token service and restarts it; it serves a token.
        let configure = try await sh(
            """
            sed -i -e 's|^applicationIntegrationUrl:.*|applicationIntegrationUrl: \(service.url)|' -e 's|^domainName:.*|domainName: 127.0.0.1|' \
                /etc/waf-tokend/waf-tokend.yaml && systemctl restart waf-tokend.service
            """)
        #expect(configure.status == 0, "\(configure.stderr)")
        let token = try await sh("waf-tokenctl token --wait 20")
        #expect(token.status == 0, "\(token.stderr)")
        let value = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await service.protected(header: value).status == 200)
        let pid = try await property("MainPID")

        // Upgrade: the changed conffile and the state stay, the service restarts and serves the
        // same token from its state at once.
        let upgrade = try await sh("dpkg -i /mnt/out/\(second.lastPathComponent)")
        #expect(upgrade.status == 0, "\(upgrade.stdout)\(upgrade.stderr)")
        #expect(try await sh("dpkg-query -W -f '${Version}' waf-tokend").stdout == version + "+upgrade1")
        #expect(try await sh("grep -q '\(service.url)' /etc/waf-tokend/waf-tokend.yaml").status == 0, "the conffile was kept")
        #expect(try await sh("test -s /var/lib/waf-tokend/token.json").status == 0, "the state was kept")
        #expect(try await becomesActive("waf-tokend.service"))
        #expect(try await becomesActive("waf-tokend.socket"), "the socket unit still holds the socket")
        #expect(try await property("MainPID") != pid, "the service was restarted")
        // At once: a fresh saved token answers a wait without a fetch (a fetch would bring another).
        let after = try await sh("waf-tokenctl token --wait 20")
        #expect(after.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == value, "the saved token, served at once")

        try await sandbox(sh, service: service)
        try await HOOK4_reloadUnit(sh)

        // Remove: stopped, the socket gone, the configuration left.
        let remove = try await sh("dpkg -r waf-tokend")
        #expect(remove.status == 0, "\(remove.stdout)\(remove.stderr)")
        #expect(try await sh("systemctl is-active --quiet waf-tokend.service").status != 0, "the service stopped")
        #expect(try await sh("systemctl is-active --quiet waf-tokend.socket").status != 0, "the socket unit stopped")
        #expect(try await sh("test -e /run/waf-tokend/token.sock").status != 0, "the socket is gone")
        #expect(try await sh("test -e /usr/sbin/waf-tokend").status != 0)
        #expect(try await sh("test -e /etc/waf-tokend/waf-tokend.yaml").status == 0, "remove keeps the configuration")

        // Purge: configuration and state gone.
        let purge = try await sh("dpkg -P waf-tokend")
        #expect(purge.status == 0, "\(purge.stdout)\(purge.stderr)")
        #expect(try await sh("test -e /etc/waf-tokend").status != 0, "the configuration is gone")
        #expect(try await sh("test -e /var/lib/waf-tokend").status != 0, "the state is gone")
    }

    /// TENANT-14 under the installed unit's sandbox: auth.listen and a proxy on a loopback port find
    /// their peer (the unit allows AF_NETLINK), an allowed uid gets its token and a refused one
    /// does not; allow-lists naming users the sandbox shows as nobody (PrivateUsers=yes) stop the
    /// start with the drop-in named.
    private func sandbox(
        _ sh: (String) async throws -> (status: Int32, stdout: String, stderr: String), service: ServiceProcess
    ) async throws {
        // The keys as variables in a drop-in: the conffile stays as the operator left it.
        func dropIn(_ variables: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            let lines = ["[Service]"] + variables.map { "Environment=\($0)" }
            return try await sh(
                "mkdir -p /etc/systemd/system/waf-tokend.service.d && printf '%s\\n' \(lines.map { "'\($0)'" }.joined(separator: " ")) "
                    + "> /etc/systemd/system/waf-tokend.service.d/test.conf && systemctl daemon-reload && systemctl restart waf-tokend.service")
        }
        let configured = try await dropIn([
            "WAF_TOKEND_AUTH_LISTEN=127.0.0.1:0", "WAF_TOKEND_AUTH_ALLOWED_USERS=root", "WAF_TOKEND_PROXY_LISTEN=127.0.0.1:0",
            "WAF_TOKEND_PROXY_UPSTREAM=\(service.origin)", "WAF_TOKEND_PROXY_ALLOWED_USERS=root",
        ])
        try #require(configured.status == 0, "\(configured.stderr)")
        _ = try await sh("waf-tokenctl token --wait 20")
        // Where they listen, as bound: from the daemon's own lines (ports the system chose), whose
        // metadata the journal keeps as fields (auth.listen as AUTH_LISTEN); the last start's.
        let journal = try await sh("journalctl -u waf-tokend.service -o verbose --no-pager | grep -E '^ *(AUTH|PROXY)_LISTEN='").stdout
        func bound(_ field: String) -> String? {
            journal.split(whereSeparator: { $0 == " " || $0 == "\n" }).last { $0.hasPrefix(field + "=") }.map {
                String($0.dropFirst(field.count + 1))
            }
        }
        let auth = try #require(bound("AUTH_LISTEN"), "\(journal)")
        let proxy = try #require(bound("PROXY_LISTEN"), "\(journal)")
        // A request over bash's /dev/tcp (no curl in the container), as root or as nobody; the status line.
        func get(_ address: String, _ path: String, asNobody: Bool) async throws -> String {
            let parts = address.split(separator: ":")
            let request =
                #"exec 3<>/dev/tcp/\#(parts[0])/\#(parts[1]); printf "GET \#(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" >&3; head -1 <&3"#
            let who = asNobody ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : ""
            return try await sh("\(who)bash -c '\(request)'").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try await get(auth, "/v1/auth", asNobody: false).hasPrefix("HTTP/1.1 200"), "root, allowed, on auth.listen")
        #expect(try await get(auth, "/v1/auth", asNobody: true).hasPrefix("HTTP/1.1 403"), "nobody, refused, on auth.listen")
        #expect(try await get(proxy, "/protected/x", asNobody: false).hasPrefix("HTTP/1.1 200"), "root, allowed, through the proxy")
        #expect(try await get(proxy, "/protected/x", asNobody: true).hasPrefix("HTTP/1.1 403"), "nobody, refused, by the proxy")

        // Lists naming a user the sandbox cannot tell apart: refused at start, the drop-in named.
        let naming = try await dropIn(["WAF_TOKEND_SOCKET_ALLOWED_USERS=4242"])
        #expect(naming.status != 0, "the start fails")
        let said = try await sh("journalctl -u waf-tokend.service -o cat --no-pager | tail -20").stdout
        #expect(said.contains("user 4242") && said.contains("PrivateUsers=no"), "\(said)")
        let restored = try await sh(
            "rm /etc/systemd/system/waf-tokend.service.d/test.conf && systemctl daemon-reload && systemctl reset-failed waf-tokend.service; "
                + "systemctl restart waf-tokend.service")
        #expect(restored.status == 0, "\(restored.stderr)")
    }

    /// HOOK-4 under the installed unit: a `reload` action reloads a unit through systemd's D-Bus
    /// API, allowed by exactly the polkit rule docs/delivery.md gives (deploy/polkit/).
    private func HOOK4_reloadUnit(_ sh: (String) async throws -> (status: Int32, stdout: String, stderr: String)) async throws {
        let rule = try String(contentsOf: repositoryDirectory.appendingPathComponent("deploy/polkit/50-waf-tokend-reload.rules"), encoding: .utf8)
            .replacingOccurrences(of: "app.service", with: "waf-hook-target.service")
        let target = """
            [Service]
            ExecStart=/bin/sleep infinity
            ExecReload=/bin/sh -c 'echo reloaded >> /run/waf-hook-target.reloads'
            """
        let setUp = try await sh(
            """
            cat > /etc/systemd/system/waf-hook-target.service <<'UNIT'
            \(target)
            UNIT
            mkdir -p /etc/polkit-1/rules.d && cat > /etc/polkit-1/rules.d/50-waf-tokend-reload.rules <<'RULE'
            \(rule)
            RULE
            systemctl daemon-reload && systemctl restart polkit.service && systemctl start waf-hook-target.service \
            && mkdir -p /etc/systemd/system/waf-tokend.service.d \
            && printf '%s\\n' '[Service]' 'Environment="WAF_TOKEND_SINKS_ON_TOKEN=[{reload: waf-hook-target.service}]"' \
                > /etc/systemd/system/waf-tokend.service.d/hook.conf \
            && systemctl daemon-reload && systemctl restart waf-tokend.service
            """)
        try #require(setUp.status == 0, "\(setUp.stdout)\(setUp.stderr)")
        // A new token (the saved one is fresh, so a restart fetches none): the unit is reloaded.
        let refreshed = try await sh("waf-tokenctl refresh")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        var reloads = ""
        for _ in 0..<100 {
            reloads = try await sh("cat /run/waf-hook-target.reloads 2>/dev/null").stdout
            if reloads.contains("reloaded") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let journal = try await sh("journalctl -u waf-tokend.service -o cat --no-pager | tail -5").stdout
        #expect(reloads.contains("reloaded"), "the unit was reloaded: \(journal)")
        // Exactly that unit: another is refused.
        _ = try await sh(
            "printf '%s\\n' '[Service]' 'Environment=\"WAF_TOKEND_SINKS_ON_TOKEN=[{reload: dbus.service}]\"' "
                + "> /etc/systemd/system/waf-tokend.service.d/hook.conf && systemctl daemon-reload && systemctl restart waf-tokend.service "
                + "&& waf-tokenctl refresh")
        var said = ""
        for _ in 0..<100 {
            said = try await sh("journalctl -u waf-tokend.service -o cat --no-pager | tail -20").stdout
            if said.contains("token delivery failed") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(said.contains("token delivery failed") && said.contains("reload dbus.service"), "\(said)")
        _ = try await sh("rm /etc/systemd/system/waf-tokend.service.d/hook.conf && systemctl daemon-reload && systemctl restart waf-tokend.service")
    }
}
