import Foundation
import Logging
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonConfiguration
@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFTokenProxy

/// A reload as a value: `prepare` makes a proxy's change ready without touching the proxy that
/// serves; `commit` puts it in force; `discard` lets it go. Over real sockets; the upstreams
/// refuse connections, so the proxy's 502 names the upstream a request was sent to.
@Suite("The proxy controller's prepared changes", .offPool)
struct ProxyControllerTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    static let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"

    /// A controller of a provider that holds a token, and what makes its settings.
    final class Fixture {
        let scheduler = VirtualScheduler()
        let provider: WAFTokenProvider
        let controller: ProxyController
        let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)

        init() throws {
            provider = WAFTokenProvider(
                configuration: try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com"),
                fetcher: ScriptedTokenFetcher(scheduler: scheduler), scheduler: scheduler, options: .init(jitter: false, logger: quiet))
            scheduler.runUntilIdle()
            let entry = ProviderEntry(name: "default", provider: provider, access: policy)
            controller = ProxyController(
                entry: entry, metrics: ProxyRouteTests.NoMetrics(), budget: MemoryBudget(total: 16 << 20), logger: quiet)
        }

        var connection: ConnectionSettings { .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)) }

        func settings(listen: String, upstream: String, mode: UInt16 = 0o660, threads: Int = 1) throws -> ProxySettings {
            try ProxyRouteTests.settings(url, listen: .unix(listen), upstream: upstream, mode: mode, threads: threads)
        }
    }

    /// The upstream path the proxy at `path` sent a request to (its 502 names the upstream), or nil
    /// when nothing answers there.
    static func upstreamPath(at path: String) -> String? {
        guard let client = try? RawSocket(path: path) else { return nil }
        client.send("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        let answer = client.response(timeout: .seconds(10))
        guard answer.status == 502 else { return answer.status.map { "status \($0)" } }
        return ["/a", "/b"].first { answer.text.contains("127.0.0.1:1\($0)") } ?? answer.text
    }

    @Test("a new route for the same listener is made ready and changes nothing until the commit; a discarded one never applies")
    func routeChangesAtCommit() async throws {
        let directory = try scratchDirectory("waf-proxy-controller")
        let path = directory.appendingPathComponent("proxy.sock").path
        let fixture = try Fixture()
        try await fixture.controller.apply(try fixture.settings(listen: path, upstream: "http://127.0.0.1:1/a"), connection: fixture.connection)
        #expect(Self.upstreamPath(at: path) == "/a")

        let discarded = try await fixture.controller.prepare(
            try fixture.settings(listen: path, upstream: "http://127.0.0.1:1/b"), connection: fixture.connection)
        #expect(Self.upstreamPath(at: path) == "/a", "prepared, not committed: the old route serves")
        await fixture.controller.discard(discarded)
        #expect(Self.upstreamPath(at: path) == "/a", "discarded: the old route serves")

        let change = try await fixture.controller.prepare(
            try fixture.settings(listen: path, upstream: "http://127.0.0.1:1/b"), connection: fixture.connection)
        #expect(Self.upstreamPath(at: path) == "/a", "prepared, not committed: the old route serves")
        await fixture.controller.commit(change).stop()
        #expect(Self.upstreamPath(at: path) == "/b", "committed: the new route serves")
        await fixture.controller.stop()
    }

    @Test("a new address is bound by the prepare while the old one serves; a discard lets it go, a commit stops the old")
    func newListenerAtCommit() async throws {
        let directory = try scratchDirectory("waf-proxy-controller")
        let (old, new) = (directory.appendingPathComponent("old.sock").path, directory.appendingPathComponent("new.sock").path)
        let fixture = try Fixture()
        try await fixture.controller.apply(try fixture.settings(listen: old, upstream: "http://127.0.0.1:1/a"), connection: fixture.connection)

        let discarded = try await fixture.controller.prepare(
            try fixture.settings(listen: new, upstream: "http://127.0.0.1:1/b"), connection: fixture.connection)
        #expect(Self.upstreamPath(at: old) == "/a", "prepared: the old listener serves its old route")
        await fixture.controller.discard(discarded)
        #expect(Self.upstreamPath(at: new) == nil, "discarded: the new address is let go")
        #expect(Self.upstreamPath(at: old) == "/a")

        let change = try await fixture.controller.prepare(
            try fixture.settings(listen: new, upstream: "http://127.0.0.1:1/b"), connection: fixture.connection)
        await fixture.controller.commit(change).stop()
        #expect(Self.upstreamPath(at: new) == "/b", "committed: the new listener serves")
        #expect(Self.upstreamPath(at: old) == nil, "committed: the old listener has stopped")
        await fixture.controller.stop()
    }

    @Test("the same address with another mode keeps its listener (no moment unbound): the mode changes at the commit, in place")
    func sameAddressKeepsItsListener() async throws {
        let path = try scratchDirectory("waf-proxy-controller").appendingPathComponent("proxy.sock").path
        let fixture = try Fixture()
        try await fixture.controller.apply(
            try fixture.settings(listen: path, upstream: "http://127.0.0.1:1/a", mode: 0o600), connection: fixture.connection)
        let inode = try #require(Self.inode(path))
        let change = try await fixture.controller.prepare(
            try fixture.settings(listen: path, upstream: "http://127.0.0.1:1/b", mode: 0o666, threads: 2), connection: fixture.connection)
        #expect(Self.mode(path) == 0o600, "prepared: the mode is the old one")
        #expect(Self.upstreamPath(at: path) == "/a")
        await fixture.controller.commit(change).stop()
        #expect(Self.mode(path) == 0o666, "committed: the new mode, on the same socket")
        #expect(Self.inode(path) == inode, "the listener was not bound again")
        #expect(Self.upstreamPath(at: path) == "/b")
        await fixture.controller.stop()
    }

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    static func inode(_ path: String) -> ino_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : nil
    }
}
