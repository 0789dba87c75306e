import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonTransport
@testable import WAFSocketAPI

/// The two errors of the catalog that no request over a real socket can reach on purpose
/// (ErrorCatalogTests walks the others): each held here, on the socket's own pipeline.
@Suite("Error answers a real socket cannot reach on purpose", .offPool)
struct ErrorAnswersTests {
    @Test("a request that waited gets identityChanged when the identity moved under it")
    func identityChanged() throws {
        let socket = try EmbeddedSocket()
        // The first step of a reload: the provider took a new identity and fetched its token; the
        // entry still answers for the old one. A wait answered now must not hand the new token out.
        socket.provider.reconfigure(TenantSocketTests.otherIdentity, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        socket.settle()
        let answer = try socket.exchange("GET /v1/token?wait=5 HTTP/1.1\r\n\r\n")
        #expect(answer.statusCodes == [503], "\(answer)")
        #expect(answer.contains(#""error":"identityChanged""#) && answer.contains("Retry-After: 1") && !answer.contains("token-2"), "\(answer)")
    }

    @Test("/healthz answers unresponsive when a provider does not answer within 2 s")
    func unresponsive() throws {
        let socket = try EmbeddedSocket()
        // The provider's queue is never run (the virtual scheduler is not advanced): its ping
        // never answers, as a wedged state queue would not.
        try socket.channel.writeInbound(socket.channel.allocator.buffer(string: "GET /healthz HTTP/1.1\r\n\r\n"))
        socket.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1999))
        #expect(try socket.written().isEmpty, "not before 2 s")
        socket.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let answer = try socket.written()
        #expect(answer.statusCodes == [503] && answer.contains(#""error":"unresponsive""#), "\(answer)")
    }
}
