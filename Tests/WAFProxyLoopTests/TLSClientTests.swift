import CLibSSL
import NIOCore
import Testing
import WAFProxyLoopTestKit
import WAFTestSupport
import WAFTestTraits

@testable import WAFProxyLoop

/// A throw-away CA and server certificate, a libssl server context for them (freed with the
/// fixture), and a client context that trusts the CA: what every TLS test starts from.
final class TLSFixture {
    let certificates: TestCertificates
    let server: TLSServerContext
    let client: TLSClientContext

    init() throws {
        certificates = try TestCertificates()
        server = try #require(TLSServerContext(certificateChain: certificates.serverCertificate, key: certificates.serverKey))
        client = try TLSClientContext(caFile: certificates.authority)
    }
}

@Suite("TLS client sessions on the proxy's loop", .offPool)
struct TLSClientTests {
    /// Carries the records between the two until neither has more; the server's to the client
    /// `split` bytes at a time. What the server read.
    static func exchange(_ client: TLSClientSession, _ server: TLSServerPeer, split: Int = .max) -> String {
        String(decoding: server.exchange(with: client, split: split), as: UTF8.self)
    }

    @Test("A request written before the handshake goes after it; the answer, its records cut into pieces from one byte up, comes back whole")
    func handshakeAndData() throws {
        let tls = try TLSFixture()
        for split in [1, 2, 3, 7, 100, 1000, Int.max] {
            let client = try TLSClientSession(tls.client, serverName: "localhost")
            let server = TLSServerPeer(tls.server)
            client.start()
            client.write(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
            #expect(Self.exchange(client, server, split: split) == "GET / HTTP/1.1\r\n\r\n", "split \(split)")
            #expect(client.handshakeDone && client.status == .open)
            let answer = "HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n" + String(repeating: "a", count: 4000)
            server.write(answer)
            _ = Self.exchange(client, server, split: split)
            var plaintext = ByteBuffer()
            client.read(into: &plaintext)
            #expect(String(buffer: plaintext) == answer, "split \(split)")
        }
    }

    @Test("The second session to a name resumes the first", arguments: [TLS1_2_VERSION, TLS1_3_VERSION])
    func resumption(version: Int32) throws {
        let tls = try TLSFixture()
        tls.server.limit(toVersion: version)
        var resumed: [Bool] = []
        for _ in 0..<2 {
            let client = try TLSClientSession(tls.client, serverName: "localhost")
            let server = TLSServerPeer(tls.server)
            client.start()
            _ = Self.exchange(client, server)
            // TLS 1.3 sends its ticket after the handshake, with the first data.
            server.write("x")
            _ = Self.exchange(client, server)
            #expect(client.handshakeDone)
            resumed.append(client.resumed)
        }
        #expect(resumed == [false, true])
    }

    @Test("A certificate for another name, or from a CA not trusted, fails the session with the reason")
    func verification() throws {
        let tls = try TLSFixture()
        let wrongName = try TLSClientSession(tls.client, serverName: "elsewhere.example")
        let server = TLSServerPeer(tls.server)
        wrongName.start()
        _ = Self.exchange(wrongName, server)
        #expect(wrongName.status == .failed("hostname mismatch"), "\(wrongName.status)")

        let other = try TestCertificates()
        let untrusted = try TLSClientSession(try TLSClientContext(caFile: other.authority), serverName: "localhost")
        untrusted.start()
        _ = Self.exchange(untrusted, TLSServerPeer(tls.server))
        guard case .failed(let why) = untrusted.status else { Issue.record("an untrusted certificate was taken"); return }
        #expect(why.contains("certificate"), "\(why)")
        untrusted.write(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
        #expect(untrusted.takeCiphertext() == nil, "nothing is sent on a failed session")
    }

    @Test("A session that failed its handshake and was freed leaves nothing behind to fail another on the same thread")
    func failuresStayInTheirSession() throws {
        let tls = try TLSFixture()
        let healthy = try TLSClientSession(tls.client, serverName: "localhost")
        let server = TLSServerPeer(tls.server)
        healthy.start()
        _ = Self.exchange(healthy, server)
        #expect(healthy.handshakeDone)
        do {
            let failing = try TLSClientSession(tls.client, serverName: "elsewhere.example")
            failing.start()
            _ = Self.exchange(failing, TLSServerPeer(tls.server))
            #expect(failing.status != .open)
        }
        server.write("still here")
        _ = Self.exchange(healthy, server, split: 5)
        var plaintext = ByteBuffer()
        healthy.read(into: &plaintext)
        #expect(healthy.status == .open && String(buffer: plaintext) == "still here", "\(healthy.status)")
    }

    @Test("A session with no name to verify is refused: it would take any certificate of the CA")
    func emptyName() throws {
        let context = try TLSClientContext(caFile: nil)
        #expect(throws: LoopError.self) { try TLSClientSession(context, serverName: "") }
    }

    @Test("A CA file that cannot be read is one clear error")
    func missingCAFile() {
        #expect(throws: LoopError.self) { try TLSClientContext(caFile: "/nonexistent/ca.pem") }
    }
}
