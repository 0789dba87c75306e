import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
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
        // Read, so that the close is an end of file (unread, it would be a reset).
        _ = harness.upstreamSaw()
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
        _ = harness.upstreamSaw()
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
