import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@testable import WAFDaemonClient

@Suite("The daemon's Swift client", .offPool, .timeLimit(.minutes(2)))
struct DaemonClientTests {
    @Test("the event-stream parser reads events whatever the chunks: split at every byte, CRLF or LF, comments skipped")
    func serverSentEventsAtEverySplit() {
        let stream = ": keep-alive\n\nevent: token\ndata: {\"value\":\"a\"}\n\r\nevent: lifecycle\r\ndata: one\ndata: two\n\ndata: plain\n\n"
        let bytes = Array(stream.utf8)
        let expected = [
            WAFDaemonEvent(name: "token", data: #"{"value":"a"}"#), WAFDaemonEvent(name: "lifecycle", data: "one\ntwo"),
            WAFDaemonEvent(name: "message", data: "plain"),
        ]
        for split in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = parser.feed(bytes[..<split]) + parser.feed(bytes[split...])
            #expect(events == expected, "split at \(split)")
        }
        var oneByOne = ServerSentEventParser()
        #expect(bytes.flatMap { oneByOne.feed([$0]) } == expected)
    }

    @Test("getToken, tokenReady and tokenUpdates against a running daemon")
    func sdkShapedCalls() async throws {
        try await withDaemon { _, daemon in
            let ready = try await daemon.client.tokenReady(wait: .seconds(10))
            #expect(try await daemon.client.getToken()?.value == ready.value)
            var updates = daemon.client.tokenUpdates().makeAsyncIterator()
            #expect(try await updates.next()?.value == ready.value, "the current token first")
            let refreshed = try await daemon.client.refresh(wait: .seconds(10))
            #expect(refreshed.value != ready.value)
            #expect(try await updates.next()?.value == refreshed.value, "then every new one")
        }
    }
}
