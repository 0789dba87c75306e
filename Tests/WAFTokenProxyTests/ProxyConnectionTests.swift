import CEpoll
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFProxyLoop
@testable import WAFTokenProxy

#if canImport(Glibc)
import Glibc
#endif

/// `ProxyConnection`, the machine's driver, over socketpairs: the client and scripted upstreams
/// are the test's ends of them, and the test runs the loop a step at a time (`runPending`) on its
/// own thread: no daemon, no listener, no timing but the timers'.
@Suite("The proxy's connection driver over socketpairs", .offPool)
struct ProxyConnectionTests {
    /// The upstream connections the proxy made, in order: the test's ends of their socketpairs.
    final class Upstreams: Sendable {
        private let state = NIOLockedValueBox((made: [Int32](), unreachable: 0, closedAtOnce: 0))

        var made: [Int32] { state.withLockedValue { $0.made } }

        /// The upstream's end of connection `index` goes away; closed once only (the harness
        /// closes the rest), so as not to close a descriptor another test has been given since.
        /// Shut down first: a child another test is spawning holds a copy of every descriptor until
        /// its exec, and a close alone would be no end of file to the proxy until then.
        func close(_ index: Int) {
            let descriptor = take(index)
            if descriptor >= 0 {
                shutdown(descriptor, Int32(SHUT_RDWR))
                Glibc.close(descriptor)
            }
        }
        /// The upstream's end of connection `index` goes with the request it was sent still unread:
        /// the proxy reads a reset (ECONNRESET), not an end of file.
        func reset(_ index: Int) {
            let descriptor = take(index)
            if descriptor >= 0 { Glibc.close(descriptor) }
        }
        private func take(_ index: Int) -> Int32 {
            state.withLockedValue { state in
                defer { state.made[index] = -1 }
                return state.made[index]
            }
        }

        /// The upstream's end of connection `index` stops reading: a write to it fails (EPIPE)
        /// with nothing taken, as one to a peer that reset the connection does.
        func shutDownReading(_ index: Int) {
            let descriptor = state.withLockedValue { $0.made[index] }
            if descriptor >= 0 { shutdown(descriptor, Int32(SHUT_RD)) }
        }
        func failNext(unreachable: Int = 0, closedAtOnce: Int = 0) {
            state.withLockedValue {
                $0.unreachable = unreachable
                $0.closedAtOnce = closedAtOnce
            }
        }

        func connect(on loop: EpollLoop) -> LoopStream? {
            let (unreachable, closing) = state.withLockedValue { state -> (Bool, Bool) in
                if state.unreachable > 0 {
                    state.unreachable -= 1
                    return (true, false)
                }
                defer { state.closedAtOnce = max(0, state.closedAtOnce - 1) }
                return (false, state.closedAtOnce > 0)
            }
            guard !unreachable else { return nil }
            let (ours, theirs) = Self.pair()
            guard let socket = try? LoopSocket(adopting: ours, on: loop) else { return nil }
            // The upstream is gone before the request is flushed to it: the write fails inside the flush.
            if closing { Glibc.close(theirs) }
            state.withLockedValue { $0.made.append(closing ? -1 : theirs) }
            return LoopStream(connected: socket, on: loop)
        }

        /// Close-on-exec, as every descriptor of the tests' own: a daemon another test spawns in the
        /// same moment would otherwise keep a copy of the proxy's end, and the close above would be
        /// no end of file to the client for as long as that daemon lives.
        static func pair() -> (Int32, Int32) {
            var ends: [Int32] = [0, 0]
            precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
            return (ends[0], ends[1])
        }
    }

    /// One client connection through a proxy whose provider holds `token-1`.
    final class Harness {
        // Released in this order: the loop last, as it outlives its sockets in the proxy.
        let connection: ProxyConnection
        let worker: ProxyWorker
        let upstreams = Upstreams()
        let proxy: ProxyContext
        let scheduler = VirtualScheduler()
        let client: Int32
        let loop: EpollLoop

        /// `later`: what the token service answers after the first token.
        /// `tcpClient`: the client's connection is TCP on loopback (where a reset exists), not a socketpair.
        init(
            upstreamTimeout: Int = 30, tokenWait: Int = 5, later: ScriptedTokenFetcher.Step = .success, tcpClient: Bool = false,
            budget: MemoryBudget = MemoryBudget(total: 16 << 20)
        ) throws {
            let loop = try EpollLoop()
            self.loop = loop
            let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            let provider = WAFTokenProvider(
                configuration: try WAFConfiguration(applicationIntegrationUrl: ProxyRouteTests.first, domainName: "example.com"),
                fetcher: ScriptedTokenFetcher(scheduler: scheduler, script: [.success], then: later), scheduler: scheduler,
                options: .init(jitter: false, logger: quiet))
            scheduler.runUntilIdle()
            let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
            let upstreams = upstreams
            proxy = try ProxyContext(
                entry: ProviderEntry(name: "default", provider: provider, access: policy),
                settings: ProxyRouteTests.settings(
                    ProxyRouteTests.first, upstream: "http://127.0.0.1:8080/base/", tokenWait: tokenWait, upstreamTimeout: upstreamTimeout),
                connection: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)), metrics: ProxyRouteTests.NoMetrics(),
                logger: quiet, budget: budget, connector: { _, loop in upstreams.connect(on: loop) })
            let worker = ProxyWorker(loop: loop, proxy: proxy, peers: .unixSocket, open: OpenConnections())
            self.worker = worker
            let (ours, theirs) = tcpClient ? Self.tcpPair() : Upstreams.pair()
            client = theirs
            connection = ProxyConnection(try LoopSocket(adopting: ours, on: loop), proxy: proxy, worker: worker)
            connection.admit(PeerCredentials(pid: 1, uid: 1000, gid: 1000))
        }

        deinit {
            connection.ended()
            worker.pool.closeIdle()
            close(client)
            for made in upstreams.made where made >= 0 { close(made) }
        }

        /// Both ends of a TCP connection on loopback: the server's (accepted), then the client's.
        static func tcpPair() -> (Int32, Int32) {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    precondition(bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0)
                }
            }
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { precondition(connect(client, $0, length) == 0) }
            }
            let server = accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            close(listener)
            return (server, client)
        }

        func run() {
            scheduler.runUntilIdle()
            loop.runPending()
        }

        /// Runs the loop until `done`, or fails the test at the deadline: for what comes through a
        /// close, which a child another test is spawning may hold up until its exec.
        func run(until done: () -> Bool, _ what: String, within timeout: Duration = .seconds(5)) {
            let deadline = ContinuousClock.now + timeout
            run()
            while !done() {
                guard ContinuousClock.now < deadline else {
                    Issue.record("not within \(timeout): \(what)")
                    return
                }
                usleep(1000)
                run()
            }
        }

        func send(_ text: String) {
            Self.write(client, text)
            run()
        }

        func answer(_ text: String, on index: Int = 0) {
            Self.write(upstreams.made[index], text)
            run()
        }

        static func write(_ descriptor: Int32, _ text: String) {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let result = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard result > 0 else { return }
                sent += result
            }
        }

        /// Everything the proxy wrote to `descriptor` so far, as text (`nil`: it closed its end).
        static func written(_ descriptor: Int32) -> String? {
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 {
                    text += String(decoding: buffer[..<count], as: UTF8.self)
                    continue
                }
                return count == 0 && text.isEmpty ? nil : text
            }
        }

        /// Whether `descriptor` reads an end of file, with nothing before it, within `timeout`.
        static func endOfFile(_ descriptor: Int32, within timeout: Duration) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 50) > 0 else { continue }
                return written(descriptor) == nil
            }
            return false
        }

        var clientSaw: String { Self.written(client) ?? "<closed>" }
        func upstreamSaw(_ index: Int = 0) -> String { Self.written(upstreams.made[index]) ?? "<closed>" }
    }

    static let request = "POST /api/x?q=1 HTTP/1.1\r\nHost: app.example\r\nContent-Length: 5\r\n\r\nhello"
    static let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    @Test(
        "A request split at every byte reaches the upstream as one whole request with the token, and its answer split at every byte reaches the client whole"
    )
    func splitAtEveryByte() throws {
        let whole = try Harness()
        whole.send(Self.request)
        let upstreamSees = whole.upstreamSaw()
        #expect(upstreamSees.hasPrefix("POST /base/api/x?q=1 HTTP/1.1\r\n"))
        #expect(upstreamSees.contains("aws-waf-token=token-1"))
        #expect(upstreamSees.contains("\r\nContent-Length: 5\r\n") && upstreamSees.hasSuffix("\r\n\r\nhello"))
        whole.answer(Self.answer)
        let clientSees = whole.clientSaw
        #expect(clientSees.hasPrefix("HTTP/1.1 200 OK\r\n") && clientSees.hasSuffix("\r\n\r\nok"))
        #expect(whole.connection.phase == .idle, "the guard heard the request start and its answer end")

        let request = Array(Self.request.utf8)
        for split in 1..<request.count {
            let harness = try Harness()
            harness.send(String(decoding: request[..<split], as: UTF8.self))
            harness.send(String(decoding: request[split...], as: UTF8.self))
            #expect(harness.upstreamSaw() == upstreamSees, "request split at \(split)")
        }
        let answer = Array(Self.answer.utf8)
        for split in 1..<answer.count {
            let harness = try Harness()
            harness.send(Self.request)
            harness.answer(String(decoding: answer[..<split], as: UTF8.self))
            harness.answer(String(decoding: answer[split...], as: UTF8.self))
            #expect(harness.clientSaw == clientSees, "answer split at \(split)")
        }
    }

    @Test("Kept alive: the next request goes on the pooled upstream connection")
    func keptAliveAndPooled() throws {
        let harness = try Harness()
        harness.send(Self.request)
        harness.answer(Self.answer)
        _ = harness.upstreamSaw()
        harness.send("GET /next HTTP/1.1\r\nHost: app.example\r\n\r\n")
        #expect(harness.upstreams.made.count == 1, "the pool's connection is reused")
        #expect(harness.upstreamSaw().hasPrefix("GET /base/next HTTP/1.1\r\n"))
        harness.answer(Self.answer)
        #expect(harness.clientSaw.ranges(of: "HTTP/1.1 200 OK").count == 2)
        #expect(harness.connection.isOpen)
    }

    @Test("A kept-alive connection's requests schedule no timer each: its timeouts move, and the loop's timers stay a handful")
    func timeoutsMoveWithoutTimers() throws {
        let harness = try Harness()
        for _ in 0..<200 {
            harness.send("GET /next HTTP/1.1\r\nHost: app.example\r\n\r\n")
            harness.answer(Self.answer)
        }
        #expect(harness.clientSaw.ranges(of: "HTTP/1.1 200 OK").count == 200)
        #expect(harness.loop.timersPending <= 4, "\(harness.loop.timersPending) timers for one connection after 200 requests")
    }

    @Test("A challenge with a newer token in the cache is replayed once, on the pooled connection, with the body kept")
    func challengeReplayed() throws {
        let harness = try Harness()
        harness.send(Self.request)
        _ = harness.upstreamSaw()
        // The cache moves on while the request is out: the challenge is answered with the newer token.
        harness.proxy.provider.refreshToken { _, _ in }
        // The provider's queue adopts it on a thread of its own: waited for, with a deadline.
        let deadline = ContinuousClock.now + .seconds(10)
        while harness.proxy.token(for: harness.proxy.route) != "token-2", ContinuousClock.now < deadline {
            harness.run()
            usleep(1000)
        }
        try #require(harness.proxy.token(for: harness.proxy.route) == "token-2", "the provider adopted the new token")
        harness.answer("HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 3\r\n\r\nchl")
        #expect(harness.clientSaw == "", "the challenge is held")
        #expect(harness.upstreams.made.count == 1, "the challenge's whole answer left the connection reusable")
        let replayed = harness.upstreamSaw()
        #expect(replayed.contains("aws-waf-token=token-2") && replayed.hasSuffix("hello"))
        harness.answer(Self.answer)
        #expect(harness.clientSaw.hasSuffix("ok"))
    }

    @Test("A challenge whose refresh brings no new token in time reaches the client as the upstream sent it, body and all")
    func challengePassedOn() throws {
        // The token service fails every fetch after the first: the refresh brings nothing, at once
        // or when the wait for it ends (`proxy.tokenWaitSec`, at least 1 s for a refresh).
        let harness = try Harness(tokenWait: 1, later: .fail(ScriptedTokenFetcher.outage))
        harness.send(Self.request)
        _ = harness.upstreamSaw()
        let challenge = "HTTP/1.1 202 Accepted\r\nx-amzn-waf-action: challenge\r\nContent-Length: 9\r\n\r\nchallenge"
        harness.answer(String(challenge.prefix(challenge.count - 4)))
        #expect(harness.clientSaw == "", "a challenge arriving is held")
        harness.answer(String(challenge.suffix(4)))
        var passed = harness.clientSaw
        let deadline = ContinuousClock.now + .seconds(5)
        while passed.isEmpty, ContinuousClock.now < deadline {
            usleep(10_000)
            harness.run()
            passed = harness.clientSaw
        }
        #expect(passed.hasPrefix("HTTP/1.1 202 Accepted\r\n") && passed.hasSuffix("\r\n\r\nchallenge"), "\(passed)")
        #expect(harness.upstreams.made.count == 1 && harness.upstreamSaw() == "", "no replay")
    }

    @Test("Requests pipelined past a head's worth while an answer is pending stop the client's reads, which resume when it is done")
    func pipelinedRequestsStopReads() throws {
        let harness = try Harness()
        harness.send(Self.request)
        let next = "GET /next HTTP/1.1\r\nHost: app.example\r\nX-Pad: \(String(repeating: "p", count: 1000))\r\n\r\n"
        harness.send(String(repeating: next, count: 80))
        #expect(!harness.connection.socket.reading, "80 KiB waiting behind an unanswered request: no more reads")
        // Each answer lets the next request go, and reads resume whenever less than a head's
        // worth waits: what the proxy holds of the client's stays bounded, and every request goes.
        let bound = HTTPLimits.maximumHeadBytes + 16384
        var answered = 0
        var sent = ""
        while answered < 81 {
            #expect((harness.connection.received?.readableBytes ?? 0) <= bound, "after \(answered) answers")
            sent += harness.upstreamSaw()
            harness.answer(Self.answer)
            answered += 1
        }
        #expect(sent.ranges(of: "GET /base/next HTTP/1.1\r\n").count == 80, "every pipelined request went, one after another")
        #expect(harness.clientSaw.ranges(of: "HTTP/1.1 200 OK").count == 81)
    }

    @Test("An unreachable upstream is a 502 on a connection that goes on; a close after the answer began closes the client")
    func upstreamFailures() throws {
        let harness = try Harness()
        harness.upstreams.failNext(unreachable: 1)
        harness.send(Self.request)
        let refused = harness.clientSaw
        #expect(refused.hasPrefix("HTTP/1.1 502 "), "\(refused)")
        #expect(harness.connection.isOpen, "the request was read whole: the connection goes on")

        harness.send(Self.request)
        harness.answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart")
        harness.upstreams.close(0)
        harness.run()
        #expect(harness.clientSaw.hasSuffix("part"), "what was queued went out first")
        #expect(!harness.connection.isOpen, "the client learns of the failure by the close (a reset on TCP: ProxyResetTests)")
        // The end of file may come a moment late: a child another test is spawning holds a copy of
        // every descriptor until its exec closes them.
        #expect(Harness.endOfFile(harness.client, within: .seconds(5)), "the proxy closed its end")
    }

    @Test("An answer that ends before the client's streamed body did closes the connection: the rest of the body is never read as a request")
    func earlyAnswerCloses() throws {
        let harness = try Harness()
        harness.send("POST /big HTTP/1.1\r\nHost: app.example\r\nContent-Length: 100000\r\n\r\n0123456789")
        #expect(harness.upstreamSaw().hasSuffix("\r\n\r\n0123456789"), "streamed from its head")
        harness.answer("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
        let answer = harness.clientSaw
        #expect(answer.hasPrefix("HTTP/1.1 413 ") && answer.lowercased().contains("connection: close"), "\(answer)")
        #expect(harness.connection.phase == .lingering, "closing after the answer")
        harness.send("GET /smuggled HTTP/1.1\r\nHost: app.example\r\n\r\n")
        #expect(harness.upstreams.made.count == 1 && !harness.upstreamSaw().contains("smuggled"))
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
                harness.send(part)
                // The upstream reads as it goes, as a server would: the proxy's queue for it drains.
                while harness.upstreams.made.first != nil {
                    let more = harness.upstreamSaw()
                    upstream += more
                    harness.loop.runPending()
                    if more.isEmpty { break }
                }
            }
            for part in answerParts { harness.answer(part) }
            return (upstream, harness.clientSaw)
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
        let harness = try Harness(upstreamTimeout: 1)
        harness.upstreams.failNext(closedAtOnce: 1)
        harness.send(Self.request)
        let failed = harness.clientSaw
        #expect(failed.hasPrefix("HTTP/1.1 502 "), "\(failed)")
        // The next request is still reading its body when the first request's timer would end.
        harness.send("POST /next HTTP/1.1\r\nHost: app.example\r\nContent-Length: 10\r\n\r\nhalf")
        usleep(1_300_000)
        harness.loop.runPending()
        #expect(harness.clientSaw == "", "nothing answered a request that never went upstream")
        #expect(harness.connection.isOpen)
    }

    @Test("A client that leaves while its request is out gives its body's share of the memory budget back at once")
    func budgetGivenBackAtTheClose() throws {
        let harness = try Harness()
        harness.send(Self.request)
        #expect(
            harness.proxy.budget.used(by: 1000) == 5 + ProxyUpstream.reservation(tls: false),
            "the body kept for a replay, and the upstream connection")
        shutdown(harness.client, Int32(SHUT_RDWR))
        harness.run()
        #expect(!harness.connection.isOpen)
        #expect(harness.proxy.budget.used(by: 1000) == 0, "given back with the close")
        harness.answer(Self.answer)
        #expect(harness.proxy.budget.used == 0, "given back once, not twice")
    }

    @Test("TENANT12: a peer whose share of the budget is full gets 503 overBudget, and the connection goes on")
    func TENANT12_overBudget() throws {
        // A quarter of 4 KiB per uid: less than one upstream connection's reservation.
        let harness = try Harness(budget: MemoryBudget(total: 4 * 1024))
        harness.send("GET /a HTTP/1.1\r\nHost: app.example\r\n\r\n")
        let answer = harness.clientSaw
        #expect(answer.hasPrefix("HTTP/1.1 503 ") && answer.contains(#""error":"overBudget""#) && answer.contains("Retry-After: 1"), "\(answer)")
        #expect(harness.upstreams.made.isEmpty, "no connection was made for it")
        #expect(harness.connection.isOpen, "the request was read whole: the connection goes on")
        #expect(harness.proxy.budget.used == 0, "nothing is held for the refused request")
    }

    @Test("TENANT12: a pooled connection is charged to the pool while it waits and to the peer whose request it carries")
    func TENANT12_poolCharged() throws {
        let harness = try Harness()
        harness.send("GET /a HTTP/1.1\r\nHost: app.example\r\n\r\n")
        let reservation = ProxyUpstream.reservation(tls: false)
        #expect(harness.proxy.budget.used(by: 1000) == reservation, "the peer's while its request is on it")
        harness.answer(Self.answer)
        #expect(harness.proxy.budget.used(by: 1000) == 0 && harness.proxy.budget.used(by: .pool) == reservation, "the pool's while it waits")
        harness.send("GET /b HTTP/1.1\r\nHost: app.example\r\n\r\n")
        #expect(harness.proxy.budget.used(by: 1000) == reservation && harness.proxy.budget.used(by: .pool) == 0, "the peer's again")
        harness.worker.pool.closeIdle()
        harness.answer(Self.answer)
        harness.worker.pool.closeIdle()
        #expect(harness.proxy.budget.used == 0, "given back when the connection closes")
    }

    @Test("TENANT12: a head arriving in pieces, and answers the client does not read, are charged to the peer while they wait")
    func TENANT12_partialHeadsCharged() throws {
        let harness = try Harness()
        let part = "GET /a HTTP/1.1\r\nHost: app.exa"
        harness.send(part)
        #expect(harness.proxy.budget.used(by: 1000) == part.utf8.count, "the head so far")
        harness.send("mple\r\n\r\n")
        let reservation = ProxyUpstream.reservation(tls: false)
        #expect(harness.proxy.budget.used(by: 1000) == reservation, "the head went upstream: only the connection's share")
        // An answer far larger than the socket buffers, which the client does not read: the
        // upstream sends what the proxy takes until nothing more goes.
        harness.answer("HTTP/1.1 200 OK\r\nContent-Length: \(4 << 20)\r\n\r\n")
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 16384)
        var stalled = 0
        while stalled < 3 {
            let sent = chunk.withUnsafeBytes { send(harness.upstreams.made[0], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            harness.run()
            stalled = sent > 0 ? 0 : stalled + 1
        }
        let queued = harness.connection.socket.queuedBytes
        #expect(queued > 0, "the client's queue holds what it did not read")
        #expect(harness.proxy.budget.used(by: 1000) == reservation + queued, "charged to the peer while it waits")
    }

    @Test("A pooled connection the upstream closed is not used: the next request goes on a new one and is answered")
    func pooledConnectionClosed() throws {
        let harness = try Harness()
        harness.send("GET /first HTTP/1.1\r\nHost: app.example\r\n\r\n")
        harness.answer(Self.answer)
        _ = harness.clientSaw
        // The upstream goes away while the connection waits in its pool.
        harness.upstreams.close(0)
        harness.send("GET /second HTTP/1.1\r\nHost: app.example\r\n\r\n")
        try #require(harness.upstreams.made.count == 2, "a new connection")
        #expect(harness.upstreamSaw(1).hasPrefix("GET /base/second HTTP/1.1\r\n"))
        harness.answer(Self.answer, on: 1)
        #expect(harness.clientSaw.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(harness.connection.isOpen)
    }

    /// A streamed chunked body's data, however it was cut into chunks (in bytes: "\r\n" is one
    /// Character of a String).
    static func unchunked(_ sent: String) -> String {
        let bytes = Array(sent.utf8)
        let crlf: [UInt8] = [13, 10]
        guard let start = bytes.firstRange(of: crlf + crlf) else { return sent }
        var data = Array(bytes[..<start.upperBound])
        var rest = bytes[start.upperBound...]
        while let line = rest.firstRange(of: crlf), let size = Int(String(decoding: rest[..<line.lowerBound], as: UTF8.self), radix: 16),
            size > 0
        {
            data += rest[line.upperBound...].prefix(size)
            rest = rest[line.upperBound...].dropFirst(size + 2)
        }
        return String(decoding: data, as: UTF8.self)
    }
}
