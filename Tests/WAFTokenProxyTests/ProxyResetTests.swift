import Testing
import WAFTestTraits

@testable import WAFProxyLoop
@testable import WAFTokenProxy

#if canImport(Glibc)
import Glibc
#endif

/// TENANT-15: an answer the upstream cut short reaches a TCP client cut short (a reset), never as
/// a clean end it could take for the answer's; one the upstream ended cleanly ends cleanly.
@Suite("An answer cut short is a reset to the client", .offPool)
struct ProxyResetTests {
    typealias Harness = ProxyConnectionTests.Harness

    /// What the client's end of a TCP connection reads until it ends: the bytes, and whether the
    /// end was a reset (ECONNRESET) rather than an orderly close.
    static func readToTheEnd(_ descriptor: Int32) -> (text: String, reset: Bool) {
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 5000) > 0 else { return (text, false) }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 {
                text += String(decoding: buffer[..<count], as: UTF8.self)
                continue
            }
            return (text, count < 0 && errno == ECONNRESET)
        }
    }

    @Test("TENANT15: an answer framed by the close that the upstream resets midway ends the client's TCP connection with a reset")
    func TENANT15_resetBecomesReset() throws {
        let harness = try Harness(tcpClient: true)
        harness.send("GET /stream HTTP/1.1\r\nHost: app.example\r\n\r\n")
        harness.answer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart of it")
        // The upstream goes with unread bytes in its receive queue: the proxy reads ECONNRESET.
        harness.upstreams.reset(0)
        harness.run(until: { !harness.connection.isOpen }, "the proxy read the upstream's reset")
        let seen = Self.readToTheEnd(harness.client)
        #expect(seen.text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(seen.text)")
        #expect(seen.reset, "a reset, not a clean end: \(seen.text)")
        #expect(!harness.connection.isOpen)
    }

    @Test("TENANT15: the same answer ended cleanly by the upstream ends cleanly for the client")
    func TENANT15_cleanEndStaysClean() throws {
        let harness = try Harness(tcpClient: true)
        harness.send("GET /stream HTTP/1.1\r\nHost: app.example\r\n\r\n")
        harness.answer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        // Read, so that its close is an orderly end of file, not a reset.
        _ = harness.upstreamSaw()
        harness.upstreams.close(0)
        harness.run()
        let seen = Self.readToTheEnd(harness.client)
        #expect(seen.text.hasSuffix("all of it") && !seen.reset, "\(seen)")
    }
}
