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
}
