import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFVersion

@Suite("Version", .offPool)
struct VersionTests {
    @Test("--version prints the version the Debian package carries (deploy/debian/changelog)")
    func versionIsThePackages() async throws {
        let changelog = try String(contentsOf: repositoryDirectory.appendingPathComponent("deploy/debian/changelog"), encoding: .utf8)
        let packaged = String(changelog.prefix { $0 != "\n" }.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" })
        #expect(WAFTokendVersion.current == packaged)
        let parts = packaged.split(separator: ".")
        #expect(parts.count == 3 && parts.allSatisfy { Int($0) != nil }, "MAJOR.MINOR.PATCH, as Debian compares versions")
        for executable in ["waf-tokend", "waf-tokenctl", "waf-token-service"] {
            let printed = try await run(productsDirectory.appendingPathComponent(executable).path, ["--version"])
            #expect(printed.stdout == packaged + "\n", "\(executable) --version")
        }
    }

    @Test("--version loads neither libssl, libcrypto nor libsystemd: they are loaded on first use (CLibrariesOnDemand), 2.4 ms of CPU off every exec")
    func librariesOnFirstUseOnly() async throws {
        for executable in ["waf-tokend", "waf-tokenctl"] {
            let path = productsDirectory.appendingPathComponent(executable).path
            // The dynamic loader reports every library it opens on stderr.
            let loaded = try await run("/usr/bin/env", ["LD_DEBUG=files", path, "--version"])
            #expect(loaded.status == 0 && loaded.stderr.contains("libc.so.6"), "\(executable): the loader's report: \(loaded.stderr.prefix(300))")
            for library in ["libssl.so", "libcrypto.so", "libsystemd.so"] {
                #expect(!loaded.stderr.contains(library), "\(executable) --version loaded \(library)")
            }
        }
    }

    @Test(
        "A daemon fetches and serves without loading libsystemd outside systemd, and under it, telling it READY=1 and pinging its watchdog; a notify address only a newer libsystemd knows loads it"
    )
    func libsystemdOnlyWhenNeeded() async throws {
        let service = try ServiceProcess()
        let notify = try NotifySocket(abstract: false)
        defer { notify.close() }
        // DaemonProcess passes none of the runner's systemd variables: NOTIFY_SOCKET, LISTEN_*, WATCHDOG_*, JOURNAL_STREAM.
        let systemd = ["NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "2000000"]
        for (environment, loads) in [([String: String](), false), (systemd, false), (["NOTIFY_SOCKET": "vsock:2:9999"], true)] {
            let daemon = try await DaemonProcess.serving(service: service, environment: environment.merging(["LD_DEBUG": "files"]) { $1 })
            let ready = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(ready.value.count > 40, "a token served")
            if environment == systemd {
                #expect(await notify.wait { $0.fields["READY"] == "1" } != nil, "READY=1 through the protocol itself")
                #expect(await notify.wait { $0.fields["WATCHDOG"] == "1" } != nil, "the watchdog pinged")
            }
            #expect(await daemon.stop() == 0)
            #expect(daemon.stderr.contains("libc.so.6"), "the loader's report")
            #expect(daemon.stderr.contains("libsystemd.so.0") == loads, "\(environment): libsystemd loaded: \(!loads)")
        }
    }
}
