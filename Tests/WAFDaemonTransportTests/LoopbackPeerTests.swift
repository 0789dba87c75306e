import NIOCore
import NIOPosix
import Testing

@testable import WAFDaemonTransport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// A loopback TCP client's user, from the kernel's socket tables.
@Suite("Loopback peers", .offPool)
struct LoopbackPeerTests {
    @Test("addresses as the socket tables write them")
    func tableForm() throws {
        #expect(LoopbackPeer.tableForm(try SocketAddress(ipAddress: "127.0.0.1", port: 8080)) == "0100007F:1F90")
        #expect(LoopbackPeer.tableForm(try SocketAddress(ipAddress: "::1", port: 443)) == "00000000000000000000000001000000:01BB")
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
               1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 20 4 30 10 -1
            """
        #expect(LoopbackPeer.owner(in: table, local: "0100007F:C350", remote: "0100007F:1F90") == 1000)
        #expect(LoopbackPeer.owner(in: table, local: "0100007F:C351", remote: "0100007F:1F90") == nil)
    }

    @Test("a real loopback connection's owner is this process's user")
    func realConnection() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let server = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let client = try await ClientBootstrap(group: group).connect(to: server.localAddress!).get()
        defer {
            client.close(promise: nil)
            server.close(promise: nil)
        }
        #expect(LoopbackPeer.owner(client: client.localAddress!, server: client.remoteAddress!) == getuid())
    }
}
