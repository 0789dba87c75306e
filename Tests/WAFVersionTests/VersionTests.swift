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
        "libpsl and libyaml load on first use: --version loads neither; the shipped configuration file's check both; missing, the check ends with 1 and names the library"
    )
    func parsersOnFirstUse() async throws {
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let config = repositoryDirectory.appendingPathComponent("config/waf-tokend.yaml").path
        let version = try await run("/usr/bin/env", ["LD_DEBUG=files", daemon, "--version"])
        #expect(version.status == 0 && version.stderr.contains("libc.so.6"), "the loader's report: \(version.stderr.prefix(300))")
        for library in ["libpsl.so", "libyaml", "libidn2.so", "libunistring.so"] {
            #expect(!version.stderr.contains(library), "--version loaded \(library)")
        }
        let checked = try await run("/usr/bin/env", ["LD_DEBUG=files", daemon, "--check-config", "--config", config])
        #expect(checked.status == 0, "the shipped configuration: \(checked.stdout) \(checked.stderr.suffix(300))")
        #expect(checked.stderr.contains("libyaml-0.so.2") && checked.stderr.contains("libpsl.so.5"), "a file and a domain name load both")
        let directory = try scratchDirectory("waf-parsers-on-demand")
        for (library, need) in [("libyaml-0.so.2", "configuration files"), ("libpsl.so.5", "Public Suffix List")] {
            // The loader finds this empty file first: "file too short", as after a botched upgrade.
            let libraries = directory.appendingPathComponent(library + ".d").path
            try FileManager.default.createDirectory(atPath: libraries, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: libraries + "/" + library, contents: Data()))
            let broken = try await run("/usr/bin/env", ["LD_LIBRARY_PATH=\(libraries)", daemon, "--check-config", "--config", config])
            #expect(broken.status == 1, "\(library) missing: a broken installation, 1: \(broken.stderr)")
            #expect(broken.stderr.contains("cannot load \(library)") && broken.stderr.contains(need), "one line saying which: \(broken.stderr)")
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
