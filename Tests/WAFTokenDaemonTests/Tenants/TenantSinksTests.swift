import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// TENANT-1 with the real daemon: each tenant's files belong to its group, and only its own.
@Suite("Tenants: the files each may read", .offPool, .timeLimit(.minutes(2)))
struct TenantSinksTests {
    @Test(
        "TENANT1: a provider's own jar and sinks.group: its token file and jar are its group's (0640) and hold its token alone; another tenant's uid cannot read them, the tenant's group can"
    )
    func TENANT1_groupsAndJars() async throws {
        let directory = try scratchDirectory("waf-tenant-sinks")
        // The scratch directory must be passable for the other uids that try to read.
        chmod(directory.path, 0o755)
        let path = { (name: String) in directory.appendingPathComponent(name).path }
        let tenant: UInt32 = 4242
        let pay =
            // The file's group is one of the provider's readers: a group outside them is refused (TENANT-10).
            "    allowedUsers: [root]\n    allowedGroups: [\"\(tenant)\"]\n    sinks:\n      tokenFile: \(path("pay.token"))\n      cookieJar: \(path("pay.jar"))\n      group: \"\(tenant)\"\n"
        let top = "sinks:\n  tokenFile: \(path("default.token"))\n  cookieJar: \(path("shared.jar"))\n"
        try await withTwoProviders(configuration: pay + top) { _, _, daemon in
            let payToken = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay").body)?["value"]?.string)
            let defaultToken = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10").body)?["value"]?.string)
            #expect(
                await eventually {
                    (try? String(contentsOfFile: path("pay.jar"), encoding: .utf8))?.contains(payToken) == true
                        && (try? String(contentsOfFile: path("shared.jar"), encoding: .utf8))?.contains(defaultToken) == true
                        && FileManager.default.fileExists(atPath: path("pay.token"))
                }, "\(daemon.stderr)")
            let shared = try String(contentsOfFile: path("shared.jar"), encoding: .utf8)
            #expect(!shared.contains(payToken), "the shared jar holds the providers without a jar of their own")
            #expect(try String(contentsOfFile: path("pay.jar"), encoding: .utf8).contains(defaultToken) == false)
            for file in ["pay.token", "pay.jar"] {
                let attributes = try FileManager.default.attributesOfItem(atPath: path(file))
                #expect(attributes[.groupOwnerAccountID] as? Int == Int(tenant), "\(file) belongs to the tenant's group")
                #expect(attributes[.posixPermissions] as? Int == 0o640, "\(file) is 0640")
                #expect(try await !canRead(path(file), uid: nobody), "another uid cannot read \(file)")
                #expect(try await canRead(path(file), uid: nobody, groups: [tenant]), "a member of the tenant's group reads \(file)")
            }
            for file in ["default.token", "shared.jar"] {
                #expect(try await !canRead(path(file), uid: nobody, groups: [tenant]), "the tenant's group cannot read \(file)")
            }
        }
    }

    @Test("TENANT1: a sinks.group that cannot be had is a failed write, logged with the reason and retried, and never a file of another group")
    func TENANT1_unknownGroupIsAFailedWrite() async throws {
        let directory = try scratchDirectory("waf-tenant-sinks-unknown")
        let file = directory.appendingPathComponent("token").path
        try await withDaemon(daemon: ["--sinks-token-file", file, "--sinks-group", "no-such-group-here"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(await eventually { daemon.stderr.contains("cannot give the file to group no-such-group-here") })
            #expect(!FileManager.default.fileExists(atPath: file))
        }
    }
}

/// The per-node tenants example (`deploy/kubernetes/tenants/configmap.yaml`), run as written but
/// for its token services and paths: each tenant's app user reads its own token file and not the
/// other's.
@Suite("Tenants: the Kubernetes example's files", .offPool, .timeLimit(.minutes(2)))
struct TenantExampleTests {
    @Test("TENANT1: in the tenants example, the shop's uid (group 3001) reads its token file, the payment service's uid (group 3002) cannot")
    func TENANT1_exampleFiles() async throws {
        let manifest = try String(
            contentsOfFile: repositoryDirectory.appendingPathComponent("deploy/kubernetes/tenants/configmap.yaml").path, encoding: .utf8)
        let embedded = try #require(manifest.components(separatedBy: "waf-tokend.yaml: |\n").last)
        var configuration = embedded.split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(4) }.joined(separator: "\n")
        let directory = try scratchDirectory("waf-tenant-example")
        chmod(directory.path, 0o755)
        let shop = try ServiceProcess(["--token-domain", "shop.example.com"]), pay = try ServiceProcess(["--token-domain", "pay.example.com"])
        configuration = configuration.replacingOccurrences(of: "/run/waf-tokend", with: directory.path)
            .replacingOccurrences(of: "/var/lib/waf-tokend", with: directory.appendingPathComponent("state").path)
            .replacingOccurrences(of: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", with: shop.url)
            .replacingOccurrences(of: "https://abcdefabcdef.eu-west-1.sdk.awswaf.com/abcdefabcdef/abcdefabcdef/", with: pay.url)
        let file = { (name: String) in directory.appendingPathComponent(name).path }
        do {
            let daemon = try await DaemonProcess.serving(
                service: nil, arguments: [], configFile: configuration, executable: "waf-tokend")
            #expect(
                await eventually {
                    FileManager.default.fileExists(atPath: file("shop.token")) && FileManager.default.fileExists(atPath: file("pay.token"))
                })
            #expect(try await canRead(file("shop.token"), uid: 10001, groups: [3001]), "the shop reads its own")
            #expect(try await !canRead(file("shop.token"), uid: 10002, groups: [3002]), "the payment service cannot read the shop's")
            #expect(try await canRead(file("pay.cookies.txt"), uid: 10002, groups: [3002]))
            #expect(try await !canRead(file("pay.cookies.txt"), uid: 10001, groups: [3001]))
            await daemon.stop()
        } catch {
            await shop.stop()
            await pay.stop()
            throw error
        }
        await shop.stop()
        await pay.stop()
    }
}
