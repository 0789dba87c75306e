import NIOCore
import NIOEmbedded
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFSocketAPI

@Suite("The connection guard, on an EmbeddedChannel", .offPool)
struct ConnectionGuardHandlerTests {
    @Test("a connection idle past socket.idleTimeoutSec is closed; one that drips its request gets 408")
    func timeouts() throws {
        let idle = try EmbeddedSocket()
        idle.channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(idle.isOpen)
        idle.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!idle.isOpen)

        let slow = try EmbeddedSocket()
        _ = try slow.exchange("GET /v1/tok")
        slow.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        let answer = try slow.written()
        #expect(answer.statusCodes == [408])
        #expect(!slow.isOpen)
    }

    @Test("between requests the idle timer restarts; during an answer no timer runs")
    func timerPhases() throws {
        let socket = try EmbeddedSocket()
        for _ in 0..<5 {
            socket.channel.embeddedEventLoop.advanceTime(by: .seconds(50))
            #expect(try socket.exchange(TokenFastPathHandlerTests.plain).statusCodes == [200])
        }
        #expect(socket.isOpen)
        // A request that waits (up to 30 s) for a token is not cut off by the 10 s request timeout.
        let waiting = try EmbeddedSocket(tokenFirst: false)
        _ = try waiting.exchange("GET /v1/token?wait=30 HTTP/1.1\r\n\r\n")
        waiting.channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        #expect(waiting.isOpen)
        waiting.channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        #expect(try waiting.written().statusCodes == [504])
    }

    @Test("bytes that come before the peer is known wait for the check, and a head over 16 KiB meanwhile gets 431")
    func heldUntilChecked() throws {
        let socket = try EmbeddedSocket()
        #expect(try socket.exchange(String(repeating: "x", count: 20_000)).statusCodes.first == 431 || !socket.isOpen)
    }

    @Test("a connection closed while a request waits keeps nothing alive: no timer holds its handlers")
    func closedConnectionKeepsNothingAlive() throws {
        let socket = try EmbeddedSocket(tokenFirst: false)
        weak var released: EmbeddedChannel?
        do {
            let channel = EmbeddedChannel(loop: socket.channel.embeddedEventLoop)
            released = channel
            try SocketPipeline.configure(channel, api: socket.api, peer: .fixed(SocketPeerCredentials(pid: 1, uid: 0, gid: 0)))
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/test.sock")).wait()
            try channel.writeInbound(channel.allocator.buffer(string: "GET /v1/token?wait=3600 HTTP/1.1\r\n\r\n"))
            socket.settle()
            _ = try channel.finish(acceptAlreadyClosed: true)
            socket.settle()
        }
        #expect(released == nil, "the hour-long wait's timer let go of the connection")
    }
}
