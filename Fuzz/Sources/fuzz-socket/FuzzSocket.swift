import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI
@testable import WAFTokenDaemon

// The socket's request handling: bytes into the daemon's own pipeline (SocketPipeline) on an
// EmbeddedChannel, in the chunks the input chooses. Properties: nothing traps; the token never
// appears in an error answer; in structured mode, every complete request gets one answer, in order.

private let token = "fuzz-token-0123456789"

private final class Fixture: @unchecked Sendable {
    let scheduler = VirtualScheduler()
    let api: APIContext
    let provider: WAFTokenProvider

    init() {
        let quiet = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = try! WAFConfiguration(
            applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com")
        let generation = SnapshotGeneration()
        provider = WAFTokenProvider(
            configuration: configuration, fetcher: Fixed(), scheduler: scheduler,
            options: .init(jitter: false, snapshotChanged: generation.advance, logger: quiet))
        scheduler.runUntilIdle()
        let metrics = DaemonMetrics()
        let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
        let providers = ProviderSet()
        providers.insert(ProviderEntry(name: "default", provider: provider, access: policy))
        api = APIContext(
            providers: providers,
            settings: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)),
            metrics: metrics, events: EventBroadcaster(metrics: metrics, providers: providers), generation: generation,
            info: .init(version: "fuzz", socketPath: "/fuzz.sock", demo: false, pid: 1), logger: quiet)
    }

    struct Fixed: WAFTokenFetcher {
        func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String { token }
    }
}

private let fixture = Fixture()

/// Requests the structured mode assembles, each complete and valid.
private let requests = [
    "GET /v1/token HTTP/1.1\r\n\r\n", "GET /v1/token HTTP/1.1\r\nAccept: text/plain\r\n\r\n", "GET /readyz HTTP/1.1\r\n\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "GET /v1/status HTTP/1.1\r\n\r\n", "GET /v1/cookie?path=/a HTTP/1.1\r\n\r\n",
    "GET /nowhere HTTP/1.1\r\n\r\n", "POST /v1/token HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", "GET /metrics HTTP/1.1\r\n\r\n",
    "PUT /v1/lifecycle HTTP/1.1\r\nContent-Length: 10\r\n\r\nforeground", "GET /v1/token?wait=1 HTTP/1.1\r\n\r\n",
    "GET /v1/status HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let structured = input.byte() & 1 == 1
    var payload: [UInt8]
    var expected: Int?
    if structured {
        let count = 1 + input.choose(6)
        let chosen = (0..<count).map { _ in requests[input.choose(requests.count)] }
        payload = Array(chosen.joined().utf8)
        expected = chosen.count
    } else {
        payload = input.take(4096)
    }
    let cuts = input.splits(input.choose(8), length: payload.count)
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish() }
    try! SocketPipeline.configure(channel, api: fixture.api, peer: .fixed(SocketPeerCredentials(pid: 1, uid: 0, gid: 0)))
    try! channel.connect(to: SocketAddress(unixDomainSocketPath: "/fuzz.sock")).wait()
    var start = 0
    for end in cuts + [payload.count] where end > start {
        guard channel.isActive else { break }
        try? channel.writeInbound(channel.allocator.buffer(bytes: payload[start..<end]))
        start = end
    }
    // Pipelined requests that wait on the provider are released one after the other: settle until
    // nothing more is written.
    var out = ""
    for _ in 0..<64 {
        fixture.scheduler.runUntilIdle()
        channel.embeddedEventLoop.run()
        var wrote = false
        while var buffer = try? channel.readOutbound(as: ByteBuffer.self) {
            out += buffer.readString(length: buffer.readableBytes) ?? ""
            wrote = true
        }
        if !wrote { break }
    }
    // An HTTP/1.0 request is answered as HTTP/1.0: both start an answer (splitting on 1.1 alone
    // once read a 404 and the 200 after it as one error answer holding the token).
    let answers = out.replacing("HTTP/1.0 ", with: "HTTP/1.1 ").split(separator: "HTTP/1.1 ", omittingEmptySubsequences: true)
        .filter { $0.count >= 3 && Int($0.prefix(3)) != nil }
    for answer in answers where Int(answer.prefix(3))! >= 400 && answer.contains(token) {
        violated("the token in an error answer: \(answer.prefix(200))")
    }
    // A wait request answers later (or times out); the others at once.
    if let expected, !payload.isEmpty, !String(decoding: payload, as: UTF8.self).contains("wait=") {
        if answers.count != expected { violated("\(expected) complete requests, \(answers.count) answers: \(out.prefix(300))") }
    }
    return 0
}
