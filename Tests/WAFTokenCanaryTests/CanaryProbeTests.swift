import AsyncHTTPClient
import Synchronization
import Testing
import WAFTestTraits

@testable import WAFTokenCanary

#if canImport(Glibc)
import Glibc
#endif

/// CANARY-8: one deadline for the whole probe, over a real socket.
@Suite("The canary's probe", .offPool, .timeLimit(.minutes(1)))
struct CanaryProbeTests {
    /// A server on loopback that answers its first connection's request with `head` at once,
    /// then `body` a byte every 100 ms, and reports whether the client closed before the end.
    final class DripServer: @unchecked Sendable {
        let port: Int
        private let listener: Int32
        private let closedEarly = Atomic(false)
        private let done = Atomic(false)

        init(head: String, body: String) throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, length) == 0 && listen(descriptor, 4) == 0 && getsockname(descriptor, $0, &length) == 0
                }
            }
            guard bound else {
                close(descriptor)
                throw Unbound()
            }
            listener = descriptor
            port = Int(UInt16(bigEndian: address.sin_port))
            startThread { [self, listener] in
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                defer { close(connection) }
                var request = [UInt8](repeating: 0, count: 4096)
                _ = recv(connection, &request, request.count, 0)
                _ = Array(head.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                for byte in body.utf8 {
                    usleep(100_000)
                    var one = byte
                    if send(connection, &one, 1, Int32(MSG_NOSIGNAL)) != 1 {
                        closedEarly.store(true, ordering: .relaxed)
                        break
                    }
                }
                done.store(true, ordering: .relaxed)
            }
        }

        /// The client let go of the connection before the body's end (a send failed).
        var clientLeft: Bool { closedEarly.load(ordering: .relaxed) }
        var finished: Bool { done.load(ordering: .relaxed) }

        deinit { close(listener) }

        struct Unbound: Error {}
    }

    @Test(
        "CANARY8: a URL that sends its head at once and its body a byte at a time is unreachable once the probe's deadline passed, holding no connection"
    )
    func CANARY8_oneDeadline() async throws {
        let server = try DripServer(
            head: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", body: String(repeating: "x", count: 100))
        let client = try CanaryProbe.makeClient(caFile: nil, timeout: .seconds(1))
        let probe = CanaryProbe(client: client, url: "http://127.0.0.1:\(server.port)/canary", method: "GET", timeout: .seconds(1))
        let clock = ContinuousClock()
        let started = clock.now
        let result = await probe.probe(token: "t", placement: .header)
        let took = clock.now - started
        #expect(result == .unreachable, "\(result)")
        #expect(took < .milliseconds(1800), "one deadline for the whole probe: it took \(took)")
        // The connection is let go: the server's next byte finds it closed (ten seconds at most).
        var waited = 0
        while !server.clientLeft, !server.finished, waited < 100 {
            try await Task.sleep(for: .milliseconds(100))
            waited += 1
        }
        #expect(server.clientLeft, "the probe's connection was closed, not held")
        try await client.shutdown()
    }
}
