import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFTokenProxy

/// `ProxyHandler`, the machine's driver, on `EmbeddedChannel`: a client channel and scripted
/// upstream channels on one loop, no daemon, no socket.
@Suite("The proxy's connection handler on EmbeddedChannel", .offPool)
struct ProxyHandlerTests {
    /// The upstream connections the proxy made, in order; each an `EmbeddedChannel` with the
    /// proxy's `UpstreamHandler`. Touched on the test's thread only.
    final class Upstreams: @unchecked Sendable {
        let loop: EmbeddedEventLoop
        var made: [EmbeddedChannel] = []
        /// Connections that fail to connect, counted down.
        var unreachable = 0
        /// Connections whose first flush fails and closes them at once, counted down.
        var closingOnFlush = 0
        /// Connects that never complete, counted down; their promises are kept here.
        var hanging = 0
        var hung: [EventLoopPromise<UpstreamPools.Acquired>] = []

        init(loop: EmbeddedEventLoop) { self.loop = loop }

        func connect(_ route: ProxyContext.Route) -> EventLoopFuture<UpstreamPools.Acquired> {
            if unreachable > 0 {
                unreachable -= 1
                return loop.makeFailedFuture(IOError(errnoCode: 111, reason: "connect"))
            }
            if hanging > 0 {
                hanging -= 1
                hung.append(loop.makePromise())
                return hung[hung.count - 1].futureResult
            }
            let channel = EmbeddedChannel(handler: UpstreamHandler(generation: route.generation), loop: loop)
            if closingOnFlush > 0 {
                closingOnFlush -= 1
                try! channel.pipeline.syncOperations.addHandler(ClosingOnFlush(), position: .first)
            }
            _ = channel.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 8080))
            made.append(channel)
            return loop.makeSucceededFuture(.init(channel: channel, reused: false))
        }
    }

    /// A write that fails as it is flushed: NIO closes the channel inside the flush.
    final class ClosingOnFlush: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer

        func flush(context: ChannelHandlerContext) {
            context.close(promise: nil)
        }
    }

    /// What the handler tells the connection's guard, and how many reads it lets through.
    final class GuardEvents: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        var events: [String] = []
        var reads = 0

        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }

        func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
            if let event = event as? ConnectionEvent { events.append("\(event)") }
            promise?.succeed()
        }
    }

    /// One client connection through a proxy whose provider holds `token-1`.
    struct Harness {
        let loop: EmbeddedEventLoop
        let upstreams: Upstreams
        let client: EmbeddedChannel
        let guardEvents: GuardEvents
        let proxy: ProxyContext
        let scheduler: VirtualScheduler

        init(upstream: String = "http://127.0.0.1:8080/base/") throws {
            let loop = EmbeddedEventLoop()
            let guardEvents = GuardEvents()
            let scheduler = VirtualScheduler()
            self.loop = loop
            self.guardEvents = guardEvents
            self.scheduler = scheduler
            let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            let provider = WAFTokenProvider(
                configuration: try WAFConfiguration(applicationIntegrationUrl: ProxyRouteTests.first, domainName: "example.com"),
                fetcher: ScriptedTokenFetcher(scheduler: scheduler), scheduler: scheduler, options: .init(jitter: false, logger: quiet))
            scheduler.runUntilIdle()
            let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
            let upstreams = Upstreams(loop: loop)
            self.upstreams = upstreams
            proxy = try ProxyContext(
                entry: ProviderEntry(name: "default", provider: provider, access: policy),
                settings: ProxyRouteTests.settings(ProxyRouteTests.first, upstream: upstream),
                connection: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)), group: loop, loopGate: LoopGate(),
                metrics: ProxyRouteTests.NoMetrics(), logger: quiet, connector: { route, _ in upstreams.connect(route) })
            let connection = ConnectionState()
            connection.identified(as: PeerCredentials(pid: 1, uid: 1000, gid: 1000), allowed: true)
            client = EmbeddedChannel(handlers: [guardEvents, ProxyHandler(proxy: proxy, connection: connection)], loop: loop)
            _ = client.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1))
        }

        func send(_ text: String) throws {
            try client.writeInbound(client.allocator.buffer(string: text))
            loop.run()
        }

        func answer(_ text: String, on index: Int = 0) throws {
            try upstreams.made[index].writeInbound(client.allocator.buffer(string: text))
            loop.run()
        }

        /// Everything written to `channel` so far, as text.
        static func written(_ channel: EmbeddedChannel) throws -> String {
            var text = ""
            while var bytes = try channel.readOutbound(as: ByteBuffer.self) { text += bytes.readString(length: bytes.readableBytes) ?? "" }
            return text
        }
    }

    static let request = "POST /api/x?q=1 HTTP/1.1\r\nHost: app.example\r\nContent-Length: 5\r\n\r\nhello"
    static let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    @Test(
        "A request split at every byte reaches the upstream as one whole request with the token, and its answer split at every byte reaches the client whole"
    )
    func splitAtEveryByte() throws {
        let whole = try Harness()
        try whole.send(Self.request)
        let upstreamSees = try Harness.written(whole.upstreams.made[0])
        #expect(upstreamSees.hasPrefix("POST /base/api/x?q=1 HTTP/1.1\r\n"))
        #expect(upstreamSees.contains("aws-waf-token=token-1"))
        #expect(upstreamSees.contains("\r\nContent-Length: 5\r\n") && upstreamSees.hasSuffix("\r\n\r\nhello"))
        try whole.answer(Self.answer)
        let clientSees = try Harness.written(whole.client)
        #expect(clientSees.hasPrefix("HTTP/1.1 200 OK\r\n") && clientSees.hasSuffix("\r\n\r\nok"))
        #expect(whole.guardEvents.events == ["requestStarted", "responseFinished(partialRequestPending: false)"])

        let request = Array(Self.request.utf8)
        for split in 1..<request.count {
            let harness = try Harness()
            try harness.send(String(decoding: request[..<split], as: UTF8.self))
            try harness.send(String(decoding: request[split...], as: UTF8.self))
            #expect(try Harness.written(harness.upstreams.made[0]) == upstreamSees, "request split at \(split)")
        }
        let answer = Array(Self.answer.utf8)
        for split in 1..<answer.count {
            let harness = try Harness()
            try harness.send(Self.request)
            try harness.answer(String(decoding: answer[..<split], as: UTF8.self))
            try harness.answer(String(decoding: answer[split...], as: UTF8.self))
            #expect(try Harness.written(harness.client) == clientSees, "answer split at \(split)")
        }
    }

    @Test("Kept alive: the next request goes on the pooled upstream connection")
    func keptAliveAndPooled() throws {
        let harness = try Harness()
        try harness.send(Self.request)
        try harness.answer(Self.answer)
        _ = try Harness.written(harness.upstreams.made[0])
        try harness.send("GET /next HTTP/1.1\r\nHost: app.example\r\n\r\n")
        #expect(harness.upstreams.made.count == 1, "the pool's connection is reused")
        #expect(try Harness.written(harness.upstreams.made[0]).hasPrefix("GET /base/next HTTP/1.1\r\n"))
        try harness.answer(Self.answer)
        #expect(try Harness.written(harness.client).ranges(of: "HTTP/1.1 200 OK").count == 2)
        #expect(harness.client.isActive)
    }

    @Test("A challenge with a newer token in the cache is replayed once, on the pooled connection, with the body kept")
    func challengeReplayed() throws {
        let harness = try Harness()
        try harness.send(Self.request)
        _ = try Harness.written(harness.upstreams.made[0])
        // The cache moves on while the request is out: the challenge is answered with the newer token.
        harness.proxy.provider.refreshToken { _, _ in }
        harness.scheduler.runUntilIdle()
        try harness.answer("HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 3\r\n\r\nchl")
        #expect(try Harness.written(harness.client) == "", "the challenge is held")
        #expect(harness.upstreams.made.count == 1, "the challenge's whole answer left the connection reusable")
        let replayed = try Harness.written(harness.upstreams.made[0])
        #expect(replayed.contains("aws-waf-token=token-2") && replayed.hasSuffix("hello"))
        try harness.answer(Self.answer)
        #expect(try Harness.written(harness.client).hasSuffix("ok"))
    }

    @Test("A challenge whose refresh brings no new token in time reaches the client as the upstream sent it, body and all")
    func challengePassedOn() throws {
        let harness = try Harness()
        try harness.send(Self.request)
        let challenge = "HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 9\r\n\r\nchallenge"
        try harness.answer(String(challenge.prefix(challenge.count - 4)))
        try harness.answer(String(challenge.suffix(4)))
        #expect(try Harness.written(harness.client) == "", "held while a new token is asked for")
        // The token service never answers (its scheduler is not run): the wait for it ends.
        harness.loop.advanceTime(by: .seconds(60))
        let passed = try Harness.written(harness.client)
        #expect(passed.hasPrefix("HTTP/1.1 202 Accepted\r\n") && passed.hasSuffix("\r\n\r\nchallenge"), "\(passed)")
        #expect(harness.upstreams.made.count == 1, "no replay")
    }

    @Test("Requests pipelined past a head's worth while an answer is pending stop the client's reads, which resume when it is done")
    func pipelinedRequestsStopReads() throws {
        let harness = try Harness()
        try harness.send(Self.request)
        let next = "GET /next HTTP/1.1\r\nHost: app.example\r\nX-Pad: \(String(repeating: "p", count: 1000))\r\n\r\n"
        // The proxy's own backpressure: no other handler stops reading for it.
        try harness.send(String(repeating: next, count: 80))
        let before = harness.guardEvents.reads
        harness.client.read()
        #expect(harness.guardEvents.reads == before, "80 KiB waiting behind an unanswered request: no more reads")
        try harness.answer(Self.answer)
        #expect(harness.guardEvents.reads > before, "the answer is done and the next request taken: reads resume")
    }

    @Test("An unreachable upstream is a 502 on a connection that goes on; a close after the answer began closes the client")
    func upstreamFailures() throws {
        let harness = try Harness()
        harness.upstreams.unreachable = 1
        try harness.send(Self.request)
        let refused = try Harness.written(harness.client)
        #expect(refused.hasPrefix("HTTP/1.1 502 "), "\(refused)")
        #expect(harness.client.isActive, "the request was read whole: the connection goes on")

        try harness.send(Self.request)
        try harness.answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart")
        _ = harness.upstreams.made[0].close()
        harness.loop.run()
        #expect(try Harness.written(harness.client).hasSuffix("part"))
        #expect(!harness.client.isActive, "the client learns of the failure by the close")
    }

    @Test("An answer that ends before the client's streamed body did closes the connection: the rest of the body is never read as a request")
    func earlyAnswerCloses() throws {
        let harness = try Harness()
        try harness.send("POST /big HTTP/1.1\r\nHost: app.example\r\nContent-Length: 100000\r\n\r\n0123456789")
        #expect(try Harness.written(harness.upstreams.made[0]).hasSuffix("\r\n\r\n0123456789"), "streamed from its head")
        try harness.answer("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
        let answer = try Harness.written(harness.client)
        #expect(answer.hasPrefix("HTTP/1.1 413 ") && answer.lowercased().contains("connection: close"), "\(answer)")
        #expect(!harness.client.isActive, "closed after the answer")
        try? harness.send("GET /smuggled HTTP/1.1\r\nHost: app.example\r\n\r\n")
        let upstreamSaw = try Harness.written(harness.upstreams.made[0])
        #expect(harness.upstreams.made.count == 1 && !upstreamSaw.contains("smuggled"))
    }

    @Test("A streamed chunked request and a held challenge, each split at every byte, reach the upstream and the client as they do whole")
    func streamedAndChallengedSplitAtEveryByte() throws {
        // A body past the replay buffer streams in chunks; the challenge it meets cannot be replayed.
        let body = String(repeating: "b", count: 70_000)
        let request =
            "POST /up HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n\(String(body.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n"
        let challenge = "HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nchl\r\n0\r\n\r\n"
        func run(_ requestParts: [String], _ answerParts: [String]) throws -> (upstream: String, client: String) {
            let harness = try Harness()
            var upstream = ""
            for part in requestParts {
                try harness.send(part)
                if let made = harness.upstreams.made.first { upstream += try Harness.written(made) }
            }
            for part in answerParts { try harness.answer(part) }
            return (upstream, try Harness.written(harness.client))
        }
        let whole = try run([request], [challenge])
        #expect(whole.upstream.contains("Transfer-Encoding: chunked\r\n") && whole.upstream.hasSuffix("\(body)\r\n0\r\n\r\n"))
        #expect(whole.client.hasPrefix("HTTP/1.1 202 Accepted\r\n") && whole.client.hasSuffix("3\r\nchl\r\n0\r\n\r\n"), "\(whole.client)")
        let head = request.utf8.count - body.utf8.count - 12
        for split in Array(1..<(head + 8)) + [head + 1000, request.utf8.count - 3] {
            let bytes = Array(request.utf8)
            let parts = [String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self)]
            let seen = try run(parts, [challenge])
            #expect(seen.client == whole.client, "request split at \(split)")
            #expect(Self.unchunked(seen.upstream) == Self.unchunked(whole.upstream), "request split at \(split)")
        }
        let answer = Array(challenge.utf8)
        for split in 1..<answer.count {
            let parts = [String(decoding: answer[..<split], as: UTF8.self), String(decoding: answer[split...], as: UTF8.self)]
            #expect(try run([request], parts).client == whole.client, "answer split at \(split)")
        }
    }

    @Test("A connection that closes as the request is flushed to it leaves no upstream timer behind to fail a later request")
    func noTimerOutlivesItsConnection() throws {
        let harness = try Harness()
        harness.upstreams.closingOnFlush = 1
        try harness.send(Self.request)
        let failed = try Harness.written(harness.client)
        #expect(failed.hasPrefix("HTTP/1.1 502 "), "\(failed)")
        // The next request is still reading its body when the first request's timer would end.
        try harness.send("POST /next HTTP/1.1\r\nHost: app.example\r\nContent-Length: 10\r\n\r\nhalf")
        harness.loop.advanceTime(by: .seconds(120))
        #expect(try Harness.written(harness.client) == "", "nothing answered a request that never went upstream")
        #expect(harness.client.isActive)
    }

    @Test("A client that leaves while its request waits for a connection gives its body's share of the memory budget back at once")
    func budgetGivenBackAtTheClose() throws {
        let harness = try Harness()
        harness.upstreams.hanging = 1
        try harness.send(Self.request)
        #expect(harness.proxy.budget.used(by: 1000) == 5, "the body kept for a replay")
        _ = harness.client.close()
        harness.loop.run()
        #expect(harness.proxy.budget.used(by: 1000) == 0, "given back with the close, not when the connect ends")
        harness.upstreams.hung[0].fail(ChannelError.ioOnClosedChannel)
        harness.loop.run()
        #expect(harness.proxy.budget.used == 0, "given back once, not twice")
    }

    @Test("A pooled connection that closes as the request is flushed to it: the request goes once more, on a new one, and is answered")
    func pooledConnectionClosesOnFlush() throws {
        let harness = try Harness()
        try harness.send("GET /first HTTP/1.1\r\nHost: app.example\r\n\r\n")
        try harness.answer(Self.answer)
        _ = try Harness.written(harness.client)
        // The upstream went away while the connection waited in its pool: the next write fails.
        try harness.upstreams.made[0].pipeline.syncOperations.addHandler(ClosingOnFlush(), position: .first)
        try harness.send("GET /second HTTP/1.1\r\nHost: app.example\r\n\r\n")
        try #require(harness.upstreams.made.count == 2, "a new connection for the retry")
        #expect(try Harness.written(harness.upstreams.made[1]).hasPrefix("GET /base/second HTTP/1.1\r\n"))
        try harness.answer(Self.answer, on: 1)
        #expect(try Harness.written(harness.client).hasPrefix("HTTP/1.1 200 OK\r\n"))
        harness.loop.advanceTime(by: .seconds(120))
        #expect(try Harness.written(harness.client) == "" && harness.client.isActive, "no timer of either connection fails anything")
    }

    /// A streamed chunked body's data, however it was cut into chunks.
    static func unchunked(_ sent: String) -> String {
        guard let start = sent.range(of: "\r\n\r\n") else { return sent }
        var rest = Substring(sent[start.upperBound...])
        var data = String(sent[..<start.upperBound])
        while let line = rest.range(of: "\r\n"), let size = Int(rest[..<line.lowerBound], radix: 16), size > 0 {
            let chunk = rest[line.upperBound...].prefix(size)
            data += chunk
            rest = rest[line.upperBound...].dropFirst(size + 2)
        }
        return data
    }
}
