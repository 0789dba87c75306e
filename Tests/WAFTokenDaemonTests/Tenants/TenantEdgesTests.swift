import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// The edges a review and tries from outside found, with the real daemon: a proxy's lists read
/// key by key (TENANT-10), a reload that left a listener open (TENANT-11), allow-lists a user
/// namespace makes meaningless (TENANT-14).
@Suite("Tenants at the edges", .offPool, .timeLimit(.minutes(2)))
struct TenantEdgesTests {
    @Test(
        "TENANT10: pay's proxy admits pay's readers only: a member of the socket's group, which pay's own allowedUsers replace, gets 403 and nothing goes upstream"
    )
    func TENANT10_proxyTakesThePair() async throws {
        let upstream = try await ScriptedUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let proxy = try scratchDirectory("waf-tenant-pair").appendingPathComponent("pay.sock").path
        let shop: UInt32 = 4243
        do {
            try await withTwoProviders(
                configuration:
                    "    allowedUsers: [root]\n    proxy:\n      listen: \(proxy)\n      mode: \"0666\"\n      upstream: \(upstream.origin)\n",
                arguments: ["--socket-allowed-groups", String(shop), "--socket-allowed-users", "root", "--socket-mode", "0666"]
            ) { _, _, daemon in
                _ = try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay")
                let member = try await curlAs(uid: nobody, gid: shop, proxy, "/x")
                #expect(member.code == 403, "a member of shop, not a reader of pay: \(member)")
                #expect(upstream.requests.isEmpty, "nothing of it went upstream")
                #expect(try await curlAs(uid: nobody, gid: shop, daemon.socketPath, "/v1/token").code == 200, "the socket still serves it default's")
                #expect(try await curlAs(uid: 0, proxy, "/x").code == 200, "pay's reader is served")
                #expect(upstream.requests.count == 1)
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test("TENANT11: a reload that drops the auth block leaves auth.listen running with the lists it started with, never open")
    func TENANT11_reloadKeepsListenerLists() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-tenant-reload-auth")
        let file = directory.appendingPathComponent("waf-tokend.yaml")
        let base = "applicationIntegrationUrl: \(service.url)\ndomainName: 127.0.0.1\nsocket:\n  path: \(directory.path)/token.sock\n"
        try (base + "auth:\n  listen: 127.0.0.1:0\n  allowedUsers: [root]\n").write(to: file, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(service: nil, replacing: ["--config", file.path, "--refresh-jitter", "false"], directory: directory)
        do {
            try await daemon.waitUntilServing()
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let auth = try await daemon.listening("auth.listen")
            let asNobody = {
                try await run(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://\(auth)/v1/auth",
                    ]
                ).stdout
            }
            #expect(try await asNobody() == "403")
            try base.write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await eventually { daemon.stderr.contains("configuration reloaded") }, "\(daemon.stderr)")
            #expect(daemon.stderr.contains("keeps the lists it started with"), "the log says so")
            #expect(try await asNobody() == "403", "still refused after the reload")
            #expect(try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://\(auth)/v1/auth"]).stdout == "200")
        } catch {
            await daemon.stop()
            await service.stop()
            throw error
        }
        await daemon.stop()
        await service.stop()
    }

    @Test(
        "TENANT14: in a user namespace that maps only root (PrivateUsers=yes), allow-lists naming other users are refused at start, naming the drop-in"
    )
    func TENANT14_privateUsersRefused() async throws {
        let directory = try scratchDirectory("waf-tenant-userns")
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let arguments = [
            "--user", "--map-root-user", daemon, "--config", "/dev/null", "--application-integration-url", "https://x.example.com/a/b/",
            "--domain-name", "example.com", "--socket-path", directory.appendingPathComponent("token.sock").path,
        ]
        let refused = try await run("/usr/bin/unshare", arguments + ["--socket-allowed-users", "1000"])
        #expect(refused.status == 78, "\(refused)")
        #expect(refused.stderr.contains("user 1000") && refused.stderr.contains("PrivateUsers=no"), "\(refused.stderr)")
        let proxyGroup = try await run("/usr/bin/unshare", arguments + ["--socket-allowed-groups", "4242"])
        #expect(proxyGroup.status == 78 && proxyGroup.stderr.contains("group 4242"), "\(proxyGroup.stderr)")
        // Whose processes a signal action may reach: through the namespace, everyone is nobody.
        let signalUsers = try await run("/usr/bin/unshare", arguments + ["--sinks-on-token-users", "1000"])
        #expect(signalUsers.status == 78 && signalUsers.stderr.contains("sinks.onTokenUsers"), "\(signalUsers.stderr)")
    }

    @Test("TENANT3: an event stream without a selector ends when a reload takes the peer off the socket's lists")
    func TENANT3_streamWithoutSelector() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-tenant-reload-stream")
        chmod(directory.path, 0o755)
        let file = directory.appendingPathComponent("waf-tokend.yaml")
        let base =
            "applicationIntegrationUrl: \(service.url)\ndomainName: 127.0.0.1\nsocket:\n  path: \(directory.path)/token.sock\n  mode: \"0666\"\n"
        try base.write(to: file, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(service: nil, replacing: ["--config", file.path, "--refresh-jitter", "false"], directory: directory)
        do {
            try await daemon.waitUntilServing()
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let output = directory.appendingPathComponent("stream.txt").path
            let stream = try SpawnedProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/curl", "-sN", "--max-time", "60", "--unix-socket",
                    daemon.socketPath, "http://localhost/v1/events",
                ], output: output)
            #expect(await eventually { (try? String(contentsOfFile: output, encoding: .utf8))?.contains("event: token") == true })
            try (base + "  allowedUsers: [root]\n").write(to: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await stream.waitForExit(timeout: .seconds(10)) != nil, "the stream of a peer the socket's lists no longer let in ends")
        } catch {
            await daemon.stop()
            await service.stop()
            throw error
        }
        await daemon.stop()
        await service.stop()
    }

    @Test("TENANT6: an upstream that is down is logged once a minute, with how many failed, not once per request")
    func TENANT6_upstreamFailuresLoggedOnce() async throws {
        // A privileged port no test binds (tcpmux, never running here): every connect is refused.
        let closed = "127.0.0.1:1"
        let proxy = try scratchDirectory("waf-tenant-upstream-down").appendingPathComponent("proxy.sock").path
        try await withDaemon(daemon: ["--proxy-listen", proxy, "--proxy-upstream", "http://\(closed)/"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            for _ in 0..<10 { #expect(try await curl(proxy, "/x").code == 502) }
            #expect(daemon.stderr.components(separatedBy: "proxy: upstream unreachable").count == 2, "\(daemon.stderr)")
        }
    }
}
