import NIOCore
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI

@Suite("HTTP strictness on the socket, on an EmbeddedChannel", .offPool)
struct ProtocolTests {
    @Test("a head over 16 KiB gets 431, whether one big field or many small ones; one just under is served")
    func oversizeHeads() throws {
        let big = "GET /v1/token HTTP/1.1\r\nX-Big: \(String(repeating: "a", count: 17_000))\r\n\r\n"
        #expect(try EmbeddedSocket().exchange(big).statusCodes == [431])
        let many = "GET /v1/status HTTP/1.1\r\n" + (0..<1400).map { "X-\($0): vvvvv\r\n" }.joined() + "\r\n"
        #expect(many.utf8.count > 16 * 1024)
        #expect(try EmbeddedSocket().exchange(many).statusCodes == [431])
        let under = "GET /v1/status HTTP/1.1\r\n" + (0..<800).map { "X-\($0): vvvvv\r\n" }.joined() + "\r\n"
        #expect(under.utf8.count < 16 * 1024)
        #expect(try EmbeddedSocket().exchange(under).statusCodes == [200])
    }

    @Test("a request asking for an upgrade is answered without one, and pipelined requests after it are answered")
    func upgradeThenPipelined() throws {
        let upgrade = "GET /v1/status HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        let answer = try EmbeddedSocket().exchange(upgrade + "GET /healthz HTTP/1.1\r\n\r\n" + "GET /v1/token HTTP/1.1\r\n\r\n")
        #expect(answer.statusCodes == [200, 200, 200], "\(answer)")
        #expect(!answer.contains("101"))
    }

    @Test(
        "a query value that is not a number of seconds, or does not decode, is refused with 400",
        arguments: [
            "/v1/token?wait=5%00", "/v1/token?wait=5abc", "/v1/token?wait=-1", "/v1/token?wait=0", "/v1/token?wait=1e3", "/v1/token?wait=%zz",
            "/v1/token?wait=3601", "/v1/refresh?wait=nan",
        ])
    func badQueries(target: String) throws {
        let method = target.hasPrefix("/v1/refresh") ? "POST" : "GET"
        let answer = try EmbeddedSocket().exchange("\(method) \(target) HTTP/1.1\r\n\r\n")
        #expect(answer.statusCodes == [400], "\(target): \(answer)")
    }

    @Test("malformed requests get 400, other versions 505, and the connection closes")
    func malformed() throws {
        let socket = try EmbeddedSocket()
        #expect(try socket.exchange("GARBAGE\r\n\r\n").statusCodes == [400])
        #expect(!socket.isOpen)
        let version = try EmbeddedSocket().exchange("GET /v1/token HTTP/2.0\r\n\r\n")
        #expect(version.statusCodes == [505], "\(version)")
        #expect(try EmbeddedSocket().exchange("GET /nowhere HTTP/1.1\r\n\r\n").statusCodes == [404])
        #expect(try EmbeddedSocket().exchange("DELETE /v1/token HTTP/1.1\r\n\r\n").statusCodes == [405])
    }

    @Test(
        "a head whose lines end in a bare LF is a malformed request: 400, not 505, on the fast path's request and others, whole or split at every byte",
        arguments: [
            "GET /v1/token HTTP/1.1\nHost: x\n\n", "GET /v1/status HTTP/1.1\nHost: x\n\n", "GET /v1/token HTTP/1.1\r\nHost: x\n\n",
            "GET /v1/status HTTP/1.1\r\nHost: x\r\n\n", "GET /v1/token HTTP/1.0\n\n",
        ])
    func bareLineFeed(request: String) throws {
        #expect(try EmbeddedSocket().exchange(request).statusCodes == [400], "\(request.debugDescription)")
        for split in 1..<request.utf8.count {
            let answer = try EmbeddedSocket().exchange(request, splits: [split])
            #expect(answer.statusCodes == [400], "\(request.debugDescription) split at \(split): \(answer)")
        }
    }
}
