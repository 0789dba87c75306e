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

    @Test("Start-up loads neither libssl nor libcrypto: they are loaded on first use (COpenSSLOnDemand), 1.9 ms of CPU off every exec")
    func openSSLOnFirstUseOnly() async throws {
        for executable in ["waf-tokend", "waf-tokenctl"] {
            let path = productsDirectory.appendingPathComponent(executable).path
            // The dynamic loader reports every library it opens on stderr.
            let loaded = try await run("/usr/bin/env", ["LD_DEBUG=files", path, "--version"])
            #expect(loaded.status == 0 && loaded.stderr.contains("libc.so.6"), "\(executable): the loader's report: \(loaded.stderr.prefix(300))")
            for library in ["libssl.so", "libcrypto.so"] {
                #expect(!loaded.stderr.contains(library), "\(executable) --version loaded \(library)")
            }
        }
    }
}
