import Foundation
import NIOCore
import Testing
import WAFTestSupport
import WAFTestTraits

@testable import WAFProxyLoop

#if canImport(Glibc)
import Glibc
#endif

/// A stream through a forward proxy (EGRESS-1): `CONNECT`, the proxy's answer, then the upstream's
/// bytes. The real proxy (squid) is in the daemon's tests; here, the answer's reading and a proxy
/// on the loop that says what a test tells it to.
/// What the fake proxy read, read by the test on the loop's thread only.
final class Heard: @unchecked Sendable {
    var value: [String] = []
}

@Suite("Upstream streams through a forward proxy's tunnel", .offPool)
struct LoopTunnelTests {
    /// A forward proxy on the loop: answers the `CONNECT` with `answer`, then echoes as `got …`.
    static func proxy(answering answer: String, heard: Heard) -> LoopServer {
        LoopServer(tls: nil) { text in
            heard.value.append(text)
            return heard.value.count == 1 ? answer : "got \(text)"
        }
    }

    static func stream(_ loop: EpollLoop, _ server: LoopServer, writing: String) throws -> StreamRecorder {
        let recorder = StreamRecorder()
        try onLoop(loop) {
            let port = try server.start(on: loop)
            let tunnel = LoopStream.Tunnel(authority: "api.example.com:443", authorization: "Basic YWxpY2U6cw==")
            let stream = try LoopStream(
                through: [try SocketAddress(ipAddress: "127.0.0.1", port: port)], tunnel: tunnel, tls: nil, timeout: 10_000_000_000, on: loop)
            stream.delegate = recorder
            recorder.stream = stream
            // Written before the tunnel is up: it waits for the proxy's 200.
            stream.write(ByteBuffer(string: writing))
            stream.flush()
        }
        return recorder
    }

    @Test("EGRESS2: the proxy's answer to CONNECT is read whole at every split: its status, and where the tunnel's bytes begin")
    func EGRESS2_answerAtEverySplit() {
        for (answer, status) in [
            ("HTTP/1.1 200 Connection established\r\nVia: squid\r\n\r\n", 200), ("HTTP/1.1 200\r\n\r\n", 200),
            ("HTTP/1.0 407 Proxy Auth\r\n\r\n", 407),
            ("SSH-2.0-OpenSSH\r\n\r\n", 0),
        ] {
            let bytes = Array((answer + "upstream bytes").utf8)
            let length = answer.utf8.count
            for split in 0...bytes.count {
                let head = ByteBuffer(bytes: bytes.prefix(split))
                let expected: LoopStream.Tunnel.Answer = split < length ? .incomplete : .status(status, length: length)
                #expect(LoopStream.Tunnel.answer(head) == expected, "\(answer.debugDescription) split at \(split)")
            }
        }
        #expect(LoopStream.Tunnel.answer(ByteBuffer(repeating: 0x61, count: 17 * 1024)) == .endless)
    }

    @Test("EGRESS2: through the tunnel, CONNECT names the upstream with the credentials; what was written waits for the 200, then goes")
    func EGRESS2_tunnel() throws {
        let heard = Heard()
        try withRunningLoop { loop in
            let recorder = try Self.stream(loop, Self.proxy(answering: "HTTP/1.1 200 Connection established\r\n\r\n", heard: heard), writing: "ping")
            #expect(try eventually(on: loop) { recorder.received == "got ping" }, "the upstream's answer, through the tunnel")
            let said = try onLoop(loop) { heard.value }
            #expect(
                said.first == "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic YWxpY2U6cw==\r\n\r\n",
                "\(said)")
            #expect(said.dropFirst().first == "ping", "nothing before the tunnel was up")
        }
    }

    @Test("EGRESS3: a proxy that refuses the CONNECT ends the stream with its status, and nothing written went to it")
    func EGRESS3_refused() throws {
        let heard = Heard()
        try withRunningLoop { loop in
            let recorder = try Self.stream(
                loop, Self.proxy(answering: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", heard: heard), writing: "secret")
            #expect(try eventually(on: loop) { recorder.closed != nil })
            #expect(try onLoop(loop) { recorder.closed == .refused(403) && recorder.received.isEmpty })
            #expect(try onLoop(loop) { heard.value.allSatisfy { !$0.contains("secret") } })
        }
    }

    @Test("EGRESS2: a proxy named by several addresses: after one refuses, the next gets CONNECT first, and TLS only inside the tunnel")
    func EGRESS2_nextAddressTunnels() throws {
        let heard = Heard()
        let tls = OnLoop(value: (try TLSClientContext(caFile: nil), "api.example.com"))
        try withRunningLoop { loop in
            let recorder = StreamRecorder()
            let server = Self.proxy(answering: "HTTP/1.1 200 Connection established\r\n\r\n", heard: heard)
            // A port bound and not listening refuses the connect (on every host, IPv6 or not),
            // asynchronously: the stream's next-address path, not its constructor's, takes over.
            let refusing = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            defer { close(refusing) }
            var any = sockaddr_in()
            any.sin_family = sa_family_t(AF_INET)
            any.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &any) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(refusing, $0, length) == 0 && getsockname(refusing, $0, &length) == 0 }
            }
            try #require(bound, "a port that refuses: errno \(errno)")
            let refusedPort = Int(UInt16(bigEndian: any.sin_port))
            try onLoop(loop) {
                let port = try server.start(on: loop)
                let addresses = [
                    try SocketAddress(ipAddress: "127.0.0.1", port: refusedPort), try SocketAddress(ipAddress: "127.0.0.1", port: port),
                ]
                let tunnel = LoopStream.Tunnel(authority: "api.example.com:443", authorization: nil)
                let stream = try LoopStream(to: addresses, tls: tls.value, tunnel: tunnel, timeout: 10_000_000_000, on: loop)
                stream.delegate = recorder
                recorder.stream = stream
            }
            #expect(try eventually(on: loop) { !heard.value.isEmpty }, "the second address heard something")
            let first = try onLoop(loop) { heard.value.first ?? "" }
            #expect(first.hasPrefix("CONNECT api.example.com:443 HTTP/1.1\r\n"), "the proxy heard \(first.debugDescription) first")
        }
    }
}
