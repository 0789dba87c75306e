import CEpoll
import NIOCore
import Testing
import WAFProxyLoopTestKit
import WAFTestSupport
import WAFTestTraits

@testable import WAFProxyLoop

#if canImport(Glibc)
import Glibc
#endif

/// TENANT-12: what an upstream connection's TLS session holds, measured on the heap, within what
/// the memory budget counts for it: its reservation (`LoopStream.reservation`), and a record's
/// buffer while one arrives in pieces (`heldBeyond`). Before the budget counted it, a
/// session held 117 KiB (OpenSSL's record buffers, a BIO pair of 17 KiB a side, a read buffer of
/// its own) and 730 of them, for one uid, got the daemon OOM-killed under its unit's limit.
@Suite("What an upstream connection holds", .offPool, .serialized)
struct StreamMemoryTests {
    enum Stage: String, CaseIterable {
        /// The handshake done and one answer read: a connection waiting for a request, or in the pool.
        case idle
        /// Half a record of the next answer arrived: OpenSSL holds a record's buffer until the rest comes.
        case midRecord
    }

    /// The heap's growth per session with `count` sessions in `stage`, the least of `rounds`
    /// measurements, and what the sessions say they hold beyond the reservation (`heldBeyond`).
    static func perSession(_ stage: Stage, _ tls: TLSFixture, count: Int = 100, rounds: Int = 5) throws -> (held: Int, beyond: Int) {
        var beyond = 0
        var least = Int.max
        for _ in 0..<rounds {
            var clients: [TLSClientSession] = []
            var servers: [TLSServerPeer] = []
            let before = Int(waf_heap_in_use())
            for _ in 0..<count {
                let client = try TLSClientSession(tls.client, serverName: "localhost")
                let server = TLSServerPeer(tls.server)
                client.start()
                client.write(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
                _ = TLSClientTests.exchange(client, server)
                server.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                _ = TLSClientTests.exchange(client, server)
                _ = client.read()
                if stage == .midRecord {
                    server.write(String(repeating: "x", count: 16000))
                    var records = server.takeCiphertext()
                    client.receive(records.readSlice(length: records.readableBytes / 2)!)
                }
                clients.append(client)
                servers.append(server)
            }
            // The servers' sessions go: what is left is the clients'.
            servers.removeAll()
            least = min(least, (Int(waf_heap_in_use()) - before) / count)
            beyond = clients.map(\.heldBeyond).max() ?? 0
            withExtendedLifetime(clients) {}
        }
        return (least, beyond)
    }

    /// The measurement proper, in a process of its own (`TENANT12_tlsSessionWithinReservation`
    /// starts it): other tests allocating meanwhile would be counted too.
    @Test("What TLS sessions hold, measured alone", .enabled(if: getenv("WAF_MEASURE_STREAM_MEMORY") != nil))
    func measureAlone() throws {
        let tls = try TLSFixture()
        for stage in Stage.allCases {
            let (held, beyond) = try Self.perSession(stage, tls)
            print("MEASURED \(stage.rawValue) \(held) \(beyond)")
        }
    }

    @Test("TENANT12: a TLS upstream session, idle or with a record half arrived, holds no more than the budget reserves for it")
    func TENANT12_tlsSessionWithinReservation() async throws {
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        try #require(length > 0)
        let measured = try await run(
            "/usr/bin/env",
            [
                "WAF_MEASURE_STREAM_MEMORY=1", String(decoding: path[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self),
                "--testing-library", "swift-testing", "--filter", "StreamMemoryTests/measureAlone",
            ], timeout: .seconds(120))
        var held: [String: (Int, Int)] = [:]
        for line in measured.stdout.split(separator: "\n") where line.hasPrefix("MEASURED ") {
            let words = line.split(separator: " ")
            held[String(words[1])] = (Int(words[2]) ?? .max, Int(words[3]) ?? 0)
        }
        try #require(held.count == Stage.allCases.count, "the measurement ran: \(measured.stdout.suffix(2000))")
        for stage in Stage.allCases {
            let (bytes, beyond) = held[stage.rawValue] ?? (.max, 0)
            let counted = LoopStream.reservation(tls: true) + beyond
            print(
                "a TLS upstream session, \(stage.rawValue): \(bytes) bytes of heap; counted \(counted) (reserved \(LoopStream.reservation(tls: true)), beyond it \(beyond))"
            )
            #expect(bytes > 0 && bytes <= counted, "\(stage.rawValue): \(bytes) bytes, \(counted) counted")
            if stage == .idle { #expect(beyond == 0, "an idle session holds no record buffer") }
        }
    }
}
