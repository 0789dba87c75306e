import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonConfiguration
@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFProxyLoop
@testable import WAFTokenProxy

#if canImport(Glibc)
import Glibc
#endif

/// The stop race of issue 36: an upstream lookup that answered after the proxy's loops shut down
/// made SwiftNIO report work scheduled on a closed loop (a crash in its strict mode).
@Suite("The proxy's upstream lookups and its stop", .offPool)
struct UpstreamLookupTests {
    /// A name server that takes `delay` per lookup, and counts.
    final class SlowLookups: Sendable {
        private let counts = NIOLockedValueBox((started: 0, finished: 0))
        let delay: Duration

        init(delay: Duration) { self.delay = delay }

        var started: Int { counts.withLockedValue { $0.started } }
        var finished: Int { counts.withLockedValue { $0.finished } }

        func lookUp(_ host: String, _ port: Int) throws -> [SocketAddress] {
            counts.withLockedValue { $0.started += 1 }
            defer { counts.withLockedValue { $0.finished += 1 } }
            let (seconds, attoseconds) = delay.components
            usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
            return [try SocketAddress(ipAddress: "127.0.0.1", port: 1)]
        }
    }

    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A proxy at `path` to `upstream`, its provider holding a token, its lookups `lookups`'.
    static func proxy(
        at path: String, upstream: String, lookups: SlowLookups, resolver: UpstreamResolver? = nil, upstreamTimeout: Int = 30
    ) throws -> ProxyServer {
        let scheduler = VirtualScheduler()
        let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
        let provider = WAFTokenProvider(
            configuration: try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com"),
            fetcher: ScriptedTokenFetcher(scheduler: scheduler), scheduler: scheduler, options: .init(jitter: false, logger: quiet))
        scheduler.runUntilIdle()
        let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
        return try ProxyServer(
            entry: ProviderEntry(name: "default", provider: provider, access: policy),
            settings: try ProxyRouteTests.settings(url, listen: .unix(path), upstream: upstream, upstreamTimeout: upstreamTimeout),
            connection: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)), metrics: ProxyRouteTests.NoMetrics(),
            budget: MemoryBudget(total: 16 << 20), logger: quiet, resolver: resolver ?? UpstreamResolver(lookUp: lookups.lookUp))
    }

    @Test("A stop answers every lookup not answered yet while the loops run, at once; the lookups queued never run")
    func stopAnswersLookups() async throws {
        let path = try scratchDirectory("waf-proxy-lookups").appendingPathComponent("proxy.sock").path
        // Long enough that every request's lookup is queued behind the first, however slow the
        // machine (the thread sanitizer makes it several times slower).
        let lookups = SlowLookups(delay: .seconds(3))
        let resolver = UpstreamResolver(lookUp: lookups.lookUp)
        let server = try Self.proxy(at: path, upstream: "https://upstream.example.com/", lookups: lookups, resolver: resolver)
        try await server.start()
        let clients = try (0..<20).map { _ in try RawSocket(path: path) }
        for client in clients { client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n") }
        #expect(await eventually { lookups.started > 0 && resolver.running == 20 }, "each request began a lookup (\(resolver.running))")
        let stopping = ContinuousClock.now
        await server.stop(grace: .milliseconds(100))
        #expect(ContinuousClock.now - stopping < .milliseconds(450), "the stop waited for the name server")
        #expect(resolver.running == 0, "every lookup was answered before the loops shut down")
        #expect(await eventually(for: .seconds(10)) { lookups.finished == 1 }, "the lookup under way ended")
        try await Task.sleep(for: .milliseconds(300))
        #expect(lookups.started == 1, "the lookups queued behind the one under way never ran (\(lookups.started) ran)")
    }

    @Test("A lookup answers on its loop with what the name server said; after the stop none begins, and a late one fails at once")
    func lookupAnswersOnItsLoop() async throws {
        let thread = try LoopThread(name: "lookup-test")
        defer { thread.stopAndJoin() }
        let loop = thread.loop
        let lookups = SlowLookups(delay: .milliseconds(50))
        let resolver = UpstreamResolver(lookUp: lookups.lookUp)
        let answers = NIOLockedValueBox<[String]>([])
        func lookUp(_ host: String) {
            loop.execute {
                resolver.lookUp(host, port: 443, on: loop) { answer in
                    let onLoop = loop.inLoop
                    answers.withLockedValue { $0.append("\(host) \((try? answer.get())?.count ?? -1) \(onLoop)") }
                }
            }
        }
        lookUp("a.example.com")
        #expect(await eventually { answers.withLockedValue { $0 } == ["a.example.com 1 true"] }, "\(answers.withLockedValue { $0 })")
        resolver.stop()
        lookUp("b.example.com")
        #expect(await eventually { answers.withLockedValue { $0.count } == 2 })
        #expect(answers.withLockedValue { $0.last } == "b.example.com -1 true", "a lookup after the stop fails on its loop")
        #expect(lookups.started == 1, "no lookup begins after the stop")
    }

    @Test("An upstream given as an address is connected to without a lookup: nothing of a connect runs off its loop")
    func addressNeedsNoLookup() async throws {
        let path = try scratchDirectory("waf-proxy-lookups").appendingPathComponent("proxy.sock").path
        let lookups = SlowLookups(delay: .zero)
        // Port 1: nothing listens, so the answer is the proxy's own 502 once the connect failed.
        let server = try Self.proxy(at: path, upstream: "http://127.0.0.1:1/", lookups: lookups)
        try await server.start()
        let client = try RawSocket(path: path)
        client.send("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        let answer = client.response()
        await server.stop(grace: .milliseconds(100))
        #expect(answer.status == 502, "the connect was tried and failed: \(answer.text)")
        #expect(lookups.started == 0, "an address was looked up")
    }

    @Test(
        "A lookup slower than the upstream timeout is a 504 at that timeout, and the lookups queued behind it for requests that are gone never run"
    )
    func slowLookupTimesOut() async throws {
        let path = try scratchDirectory("waf-proxy-lookups").appendingPathComponent("proxy.sock").path
        let lookups = SlowLookups(delay: .seconds(2))
        let server = try Self.proxy(
            at: path, upstream: "https://upstream.example.com/", lookups: lookups, upstreamTimeout: 1)
        try await server.start()
        let clients = try (0..<3).map { _ in try RawSocket(path: path) }
        let started = ContinuousClock.now
        for client in clients { client.send("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") }
        let answers = clients.map { $0.response(timeout: .seconds(10)) }
        let took = ContinuousClock.now - started
        try await Task.sleep(for: .seconds(3))
        await server.stop(grace: .milliseconds(100))
        #expect(answers.map(\.status) == [504, 504, 504], "\(answers.map(\.text))")
        #expect(took < .seconds(3), "answered after \(took)")
        #expect(lookups.started == 1, "the lookups of requests already answered never ran (\(lookups.started) ran)")
    }
}
