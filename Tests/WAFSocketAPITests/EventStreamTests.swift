import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI

@Suite("Server-Sent Events, on an EmbeddedChannel", .offPool)
struct EventStreamTests {
    @Test("GET /v1/events: the current token and lifecycle first, then a frame per new token")
    func events() throws {
        let socket = try EmbeddedSocket()
        let opening = try socket.exchange("GET /v1/events HTTP/1.1\r\n\r\n")
        #expect(opening.hasPrefix("HTTP/1.1 200 OK\r\n") && opening.contains("Content-Type: text/event-stream"))
        #expect(opening.contains("event: token\ndata: {") && opening.contains("\"value\":\"token-1\""))
        #expect(opening.contains("event: lifecycle\n"))
        // The daemon publishes what the provider announces: its new token.
        socket.provider.refreshToken { _, _ in }
        socket.settle()
        let next = try #require(socket.provider.cachedToken()?.token)
        socket.api.events.publish(.tokenUpdated(next, origin: .fetched), provider: "default")
        socket.settle()
        let more = try socket.written()
        #expect(more.contains("event: token") && more.contains("token-2"), "\(more)")
    }
}
