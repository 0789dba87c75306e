import Testing
import WAFTestTraits

@testable import WAFTokenProxy

#if canImport(Glibc)
import Glibc
#endif

/// TENANT-15: nothing is acted on twice. A request goes again on a new upstream connection only
/// when none of it was written, or its method is idempotent (RFC 9110 §9.2.2), or the WAF refused
/// it (a challenge's replay); an answer cut short by a reset is a reset to the client.
@Suite("The proxy sends nothing twice", .offPool)
struct ProxyRetryTests {
    typealias Harness = ProxyConnectionTests.Harness

    /// A kept-alive upstream connection after one answered `GET /a`.
    private func pooled() throws -> Harness {
        let harness = try Harness()
        harness.send("GET /a HTTP/1.1\r\nHost: app.example\r\n\r\n")
        harness.answer(ProxyConnectionTests.answer)
        _ = harness.clientSaw
        _ = harness.upstreamSaw()
        return harness
    }

    @Test("TENANT15: a POST the upstream read whole on a kept-alive connection and closed without answering is not sent again: the client gets 502")
    func TENANT15_postNotSentTwice() throws {
        let harness = try pooled()
        harness.send("POST /pay HTTP/1.1\r\nHost: app.example\r\nContent-Length: 5\r\n\r\nhello")
        #expect(harness.upstreamSaw().hasPrefix("POST /base/pay HTTP/1.1\r\n"), "the upstream read the POST")
        harness.upstreams.close(0)
        harness.run()
        #expect(harness.upstreams.made.count == 1, "no second connection: the POST went once")
        let answer = harness.clientSaw
        #expect(answer.hasPrefix("HTTP/1.1 502 ") && answer.contains("upstreamClosed"), "\(answer)")
    }

    @Test("TENANT15: an idempotent request (PUT) the upstream closed on unanswered goes once more on a new connection")
    func TENANT15_idempotentRetried() throws {
        let harness = try pooled()
        harness.send("PUT /item HTTP/1.1\r\nHost: app.example\r\nContent-Length: 5\r\n\r\nhello")
        #expect(harness.upstreamSaw().hasPrefix("PUT /base/item HTTP/1.1\r\n"))
        harness.upstreams.close(0)
        harness.run()
        try #require(harness.upstreams.made.count == 2, "a new connection for the retry")
        let again = harness.upstreamSaw(1)
        #expect(again.hasPrefix("PUT /base/item HTTP/1.1\r\n") && again.hasSuffix("hello"), "\(again)")
        harness.answer(ProxyConnectionTests.answer, on: 1)
        #expect(harness.clientSaw.hasPrefix("HTTP/1.1 200 OK\r\n"))
    }

    @Test("TENANT15: a POST on a kept-alive connection whose first write fails (nothing of it reached the upstream) goes once more")
    func TENANT15_unwrittenRetried() throws {
        let harness = try pooled()
        // The upstream is gone and has said so (a reset): the first write fails with EPIPE, and
        // not one byte of the POST was taken.
        harness.upstreams.shutDownReading(0)
        harness.send("POST /pay HTTP/1.1\r\nHost: app.example\r\nContent-Length: 5\r\n\r\nhello")
        try #require(harness.upstreams.made.count == 2, "nothing was written: the request goes on a new connection")
        #expect(harness.upstreamSaw(1).hasPrefix("POST /base/pay HTTP/1.1\r\n"))
    }
}
