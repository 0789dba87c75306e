import NIOCore
import NIOPosix
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP client's user, from the kernel's socket diagnostics (TENANT-6).
@Suite("Loopback peers", .offPool)
struct LoopbackPeerTests {
    @Test("the lookup asks for one socket by its four-tuple, ports and addresses in network order")
    func requestBytes() throws {
        let request = try #require(
            SocketDiagnostics.request(
                local: SocketAddress(ipAddress: "127.0.0.1", port: 50000), remote: SocketAddress(ipAddress: "127.0.0.1", port: 8080)))
        #expect(request.count == 16 + 56)
        #expect(Array(request[4..<6]) == [20, 0])  // SOCK_DIAG_BY_FAMILY
        #expect(request[16] == UInt8(AF_INET) && request[17] == UInt8(IPPROTO_TCP))
        #expect(Array(request[24..<28]) == [0xC3, 0x50, 0x1F, 0x90])  // 50000, 8080
        #expect(Array(request[28..<32]) == [127, 0, 0, 1] && Array(request[44..<48]) == [127, 0, 0, 1])
        #expect(SocketDiagnostics.parse([UInt8](repeating: 0, count: 20)) == nil)
    }

    @Test("TENANT6: an established loopback connection's owner is its client's user, over IPv4 and IPv6", arguments: ["127.0.0.1", "::1"])
    func TENANT6_establishedOwner(host: String) async throws {
        let (server, client) = try await Self.connect(host)
        defer {
            client.close(promise: nil)
            server.close(promise: nil)
        }
        #expect(LoopbackPeer.owner(client: client.localAddress!, server: client.remoteAddress!) == getuid())
    }

    @Test("TENANT6: a closed connection's TIME_WAIT entry (owned by uid 0) is nobody's, never root's")
    func TENANT6_timeWaitIsNobody() async throws {
        // A TIME_WAIT entry may go early (the kernel drops them when its table of them is full,
        // as when a load test beside this one closes thousands): then another connection.
        var seen: [UInt8] = []
        for _ in 0..<5 {
            let (server, client) = try await Self.connect("127.0.0.1")
            defer { server.close(promise: nil) }
            let (local, remote) = (client.localAddress!, client.remoteAddress!)
            // The client closes first, so its end waits in TIME_WAIT once the server's end closes too.
            try await client.close()
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(10)
            var socket = SocketDiagnostics.tcpSocket(local: local, remote: remote)
            while socket != nil, socket?.state != 6, clock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                socket = SocketDiagnostics.tcpSocket(local: local, remote: remote)
            }
            guard let socket, socket.state == 6 else {
                seen.append(socket?.state ?? 0)
                continue
            }
            #expect(socket.uid == 0, "TIME_WAIT entries carry uid 0: the case this guards against")
            #expect(LoopbackPeer.owner(client: local, server: remote) == nil)
            return
        }
        Issue.record("no closed connection was seen in TIME_WAIT in 5 tries (states seen, 0 for gone: \(seen))")
    }

    @Test("TENANT6: no such connection: no owner")
    func TENANT6_unknownConnection() throws {
        #expect(
            LoopbackPeer.owner(client: try SocketAddress(ipAddress: "127.0.0.1", port: 1), server: try SocketAddress(ipAddress: "127.0.0.1", port: 2))
                == nil)
    }

    /// A listening server on `host` and a client connected to it; the server closes each
    /// connection it accepts as soon as its client has closed.
    static func connect(_ host: String) async throws -> (server: any Channel, client: any Channel) {
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await ServerBootstrap(group: group).childChannelOption(.allowRemoteHalfClosure, value: false).bind(host: host, port: 0).get()
        let client = try await ClientBootstrap(group: group).connect(to: server.localAddress!).get()
        return (server, client)
    }
}
