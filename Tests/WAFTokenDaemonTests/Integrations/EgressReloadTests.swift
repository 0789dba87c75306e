import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// An egress that a reload changes (EGRESS-1): providers added, egresses moved, fetches out
/// across the commit; squid's connections leave from 127.0.0.2.
@Suite("Egress through squid, across reloads", .offPool, .timeLimit(.minutes(3)))
struct EgressReloadTests {
    /// A daemon of the configuration `file` (whose providers name `service`), for `body`; both
    /// stopped afterwards.
    static func withConfiguredDaemon(of service: ServiceProcess, file: String, _ body: (DaemonProcess) async throws -> Void) async throws {
        let daemon: DaemonProcess
        do {
            daemon = try await DaemonProcess.serving(service: nil, configFile: file)
        } catch {
            await service.stop()
            throw error
        }
        do {
            try await body(daemon)
        } catch {
            Issue.record("\(error)")
        }
        await daemon.stop()
        await service.stop()
    }

    /// `daemon` reloads `file`.
    static func reload(_ daemon: DaemonProcess, _ file: String) throws {
        try file.write(to: daemon.directory.appendingPathComponent("daemon.yaml"), atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
    }

    /// Where each of the service's token fetches came from, in order.
    static func verified(_ service: ServiceProcess) async -> [String] {
        ((try? await service.counters().calls) ?? []).filter { $0.endpoint == "verify" }.map { $0.from ?? "?" }
    }

    /// Provider `name` of `url`'s web ACL for `domain`, as a `providers:` entry.
    static func provider(_ name: String, _ url: String, _ domain: String) -> String {
        "  \(name):\n    applicationIntegrationUrl: \(url)\n    domainName: \(domain)\n"
    }

    @Test(
        "EGRESS1: a reload that adds a provider and changes another's egress: the added one's first token and the other's next come through the new egress, at once"
    )
    func EGRESS1_reloadedEgress() async throws {
        let squid = try await Squid()
        defer { Task { await squid.stop() } }
        let service = try ServiceProcess()
        // Two web ACLs' worth of identity from one service: the same URL, two domains.
        let a = Self.provider("a", service.url, "127.0.0.1"), b = Self.provider("b", service.url, "localhost")
        try await Self.withConfiguredDaemon(of: service, file: "egress:\n  proxy: direct\nproviders:\n" + a) { daemon in
            #expect(try await curl(daemon.socketPath, "/v1/token?wait=20&provider=a").code == 200)
            try Self.reload(daemon, "egress:\n  proxy: \(squid.url)\nproviders:\n" + a + b)
            // The reload is done when b exists: until then, asking for it is a 400.
            let socket = daemon.socketPath
            #expect(await eventually(for: .seconds(20)) { (try? await curl(socket, "/v1/token?wait=20&provider=b").code) == 200 })
            let fetched = await eventually(for: .seconds(20)) { await Self.verified(service).count >= 3 }
            let verified = await Self.verified(service)
            #expect(fetched, "a's second token and b's first: \(verified)")
            #expect(verified == ["127.0.0.1", "127.0.0.2", "127.0.0.2"], "a directly, then both through squid, none around it: \(verified)")
        }
    }

    @Test("EGRESS1: a fetch out through the old egress when a reload changes it: its token is not taken, a new one comes through the new egress")
    func EGRESS1_fetchAcrossTheReload() async throws {
        let squid = try await Squid()
        defer { Task { await squid.stop() } }
        // Each call answered after a second: a fetch (two calls) is still out when the reload commits.
        let service = try ServiceProcess(["--latency-ms", "1000"])
        let providers = "providers:\n" + Self.provider("a", service.url, "127.0.0.1")
        try await Self.withConfiguredDaemon(of: service, file: "egress:\n  proxy: direct\n" + providers) { daemon in
            #expect(try await curl(daemon.socketPath, "/v1/token?wait=20&provider=a").code == 200)
            let socket = daemon.socketPath
            let refresh = Task { try await curl(socket, "/v1/refresh?wait=20&provider=a", ["-X", "POST"]) }
            #expect(await eventually(for: .seconds(10)) { ((try? await service.counters().calls) ?? []).count >= 3 }, "the refresh is out")
            try Self.reload(daemon, "egress:\n  proxy: \(squid.url)\n" + providers)
            _ = try? await refresh.value
            let through = await eventually(for: .seconds(20)) { await Self.verified(service).contains("127.0.0.2") }
            let verified = await Self.verified(service)
            #expect(through, "a token fetched through squid after the reload: \(verified)")
            #expect(verified.last == "127.0.0.2", "the last token came through squid: \(verified)")
        }
    }
}
