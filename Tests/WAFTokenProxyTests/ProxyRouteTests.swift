import CoreMetrics
import Logging
import NIOPosix
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonConfiguration
@testable import WAFDaemonTransport
@testable import WAFHTTPWire
@testable import WAFProviderRegistry
@testable import WAFTokenProxy

/// TENANT-2 in the proxy: a request reads the token of the route it was sent on, or none.
@Suite("The proxy's routes and their tokens", .offPool)
struct ProxyRouteTests {
    struct NoMetrics: ProxyMetrics {
        func countRequests(endpoint: String, status: UInt, by count: Int) {}
        func proxyRequestCounters(provider: String) -> [CoreMetrics.Counter] {
            (1...5).map { CoreMetrics.Counter(label: "c\($0)", factory: NOOPMetricsHandler.instance) }
        }
        func countProxyEvent(provider: String, _ event: String) {}
        func upstreamTimer(provider: String, egress: String) -> CoreMetrics.Timer {
            CoreMetrics.Timer(label: "t", factory: NOOPMetricsHandler.instance)
        }
        func challengedAcceptedToken(provider: String) {}
        func metCaptcha(provider: String) {}
    }

    static let first = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
    static let second = "https://fedcba987654.us-east-1.sdk.awswaf.com/fedcba987654/fedcba987654/"

    /// A proxy's settings as the composition root would make them (`proxy.*`'s defaults unless given).
    static func settings(
        _ url: String, listen: ProxySettings.Listen = .unix("/run/p.sock"), upstream: String, mode: UInt16 = 0o660, tokenWait: Int = 5,
        upstreamTimeout: Int = 30, threads: Int = 1
    ) throws -> ProxySettings {
        ProxySettings(
            identity: try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").identity, listen: listen, mode: mode,
            upstream: try UpstreamTarget.parse(upstream, domainName: "example.com").get(), tokenIn: .cookie, replayBufferBytes: 65536,
            tokenWait: .seconds(tokenWait), upstreamTimeout: .seconds(upstreamTimeout), threads: threads, caFile: nil)
    }

    @Test("TENANT2: after the provider switched identity, the old route reads no token (the new one's is not its own); the new route reads it")
    func TENANT2_routeReadsItsOwnToken() throws {
        let scheduler = VirtualScheduler()
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = try WAFConfiguration(applicationIntegrationUrl: Self.first, domainName: "example.com")
        let provider = WAFTokenProvider(
            configuration: configuration, fetcher: ScriptedTokenFetcher(scheduler: scheduler), scheduler: scheduler,
            options: .init(jitter: false, logger: quiet))
        scheduler.runUntilIdle()
        let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
        let context = try ProxyContext(
            entry: ProviderEntry(name: "default", provider: provider, access: policy),
            settings: try Self.settings(Self.first, upstream: "https://old.example.com/"),
            connection: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)),
            metrics: NoMetrics(), logger: quiet)
        let old = context.route
        #expect(context.token(for: old) == "token-1")
        provider.reconfigure(
            try WAFConfiguration(applicationIntegrationUrl: Self.second, domainName: "example.com"), lifecycleProfile: .ios, jitter: false,
            cookieSecure: false)
        scheduler.runUntilIdle()
        #expect(provider.cachedToken()?.token.value == "token-2")
        #expect(context.token(for: old) == nil, "a request sent on the old route carries no token of the new identity")
        context.install(try context.route(for: Self.settings(Self.second, upstream: "https://new.example.com/"), connection: old.connection))
        #expect(context.token(for: context.route) == "token-2")
        #expect(context.token(for: old) == nil)
    }
}
