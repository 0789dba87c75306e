import Logging
import NIOCore
import NIOEmbedded
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI

/// One connection of the socket API on an `EmbeddedChannel`: the server's own pipeline
/// (`SocketPipeline`), a real provider on the virtual clock behind it, bytes in and bytes out.
final class EmbeddedSocket {
    let scheduler = VirtualScheduler()
    let service: ScriptedTokenFetcher
    let provider: WAFTokenProvider
    /// The second provider, when there is one (kept alive with the socket).
    private(set) var extra: WAFTokenProvider?
    let api: APIContext
    let channel = EmbeddedChannel()

    /// A provider that has fetched `token-1` (unless `tokenFirst` is false), and a connection from
    /// uid 1000, which `allowedUsers` may shut out. With `pay`, a second provider named pay (domain
    /// pay.example.com, `token-2`), which `payAllowedUsers` may shut out.
    init(
        tokenFirst: Bool = true, allowedUsers: [String] = [], configuration: WAFConfiguration? = nil, pay: Bool = false,
        payAllowedUsers: [String] = [], failingAfterFirst: Bool = false
    ) throws {
        service = ScriptedTokenFetcher(
            scheduler: scheduler, script: failingAfterFirst ? [.success] : [],
            then: failingAfterFirst ? .fail(ScriptedTokenFetcher.outage) : .success,
            latency: tokenFirst ? .zero : .seconds(3600))
        let generation = SnapshotGeneration()
        let configuration =
            try configuration
            ?? WAFConfiguration(
                applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com")
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        provider = WAFTokenProvider(
            configuration: configuration, fetcher: service, scheduler: scheduler,
            options: .init(jitter: false, snapshotChanged: generation.advance, logger: quiet))
        scheduler.runUntilIdle()
        let metrics = TestMetrics()
        let policy = AccessPolicy(allowedUsers: allowedUsers, allowedGroups: [], logger: quiet)
        let providers = ProviderSet()
        providers.insert(ProviderEntry(name: "default", provider: provider, access: policy, generation: generation))
        if pay {
            let configuration = try WAFConfiguration(
                applicationIntegrationUrl: "https://abcdefabcdef.eu-west-1.sdk.awswaf.com/abcdefabcdef/abcdefabcdef/", domainName: "pay.example.com")
            let second = WAFTokenProvider(
                configuration: configuration, fetcher: service, scheduler: scheduler,
                options: .init(jitter: false, snapshotChanged: generation.advance, logger: quiet))
            scheduler.runUntilIdle()
            providers.insert(
                ProviderEntry(
                    name: "pay", provider: second, access: AccessPolicy(allowedUsers: payAllowedUsers, allowedGroups: [], logger: quiet),
                    generation: generation))
            extra = second
        }
        api = APIContext(
            providers: providers,
            settings: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)),
            metrics: metrics, events: EventBroadcaster(metrics: metrics, providers: providers), generation: generation,
            info: .init(version: "test", socketPath: "/test.sock", demo: false, pid: 1), logger: quiet)
        try SocketPipeline.configure(channel, api: api, peer: .fixed(SocketPeerCredentials(pid: 42, uid: 1000, gid: 1000)))
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/test.sock")).wait()
        settle()
    }

    deinit {
        _ = try? channel.finish()
    }

    /// Runs what the provider and the event loop have to do now.
    func settle() {
        for _ in 0..<4 {
            scheduler.runUntilIdle()
            channel.embeddedEventLoop.run()
        }
    }

    /// Sends `text` in pieces cut at `splits` (byte offsets), then returns everything written back.
    func exchange(_ text: String, splits: [Int] = []) throws -> String {
        let bytes = Array(text.utf8)
        var start = 0
        for end in (splits.filter { $0 > 0 && $0 < bytes.count }.sorted() + [bytes.count]) where end > start {
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes[start..<end]))
            start = end
        }
        settle()
        return try written()
    }

    /// Everything written to the connection so far.
    func written() throws -> String {
        var out = ""
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            out += buffer.readString(length: buffer.readableBytes) ?? ""
        }
        return out
    }

    var isOpen: Bool { channel.isActive }
}

extension String {
    /// The status codes of the responses in a stream of them, in order.
    var statusCodes: [Int] {
        components(separatedBy: "HTTP/1.1 ").dropFirst().compactMap { Int($0.prefix(3)) }
    }

    func components(separatedBy separator: String) -> [String] {
        var parts: [String] = []
        var rest = self[...]
        while let range = rest.firstRange(of: separator) {
            parts.append(String(rest[..<range.lowerBound]))
            rest = rest[range.upperBound...]
        }
        parts.append(String(rest))
        return parts
    }
}

/// The API's metrics, dropped: the daemon's registry is not the API's to test.
struct TestMetrics: APIMetrics {
    func countRequests(endpoint: String, status: UInt, by count: Int) {}
    func connectionsChanged(_ count: Int) {}
    func eventSubscribersChanged(_ count: Int) {}
    func exposition(statuses: [(provider: String, status: WAFProviderStatus)]) -> [UInt8] { Array("# test\n".utf8) }
}
