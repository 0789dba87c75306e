import Foundation
import FuzzSupport
import NIOCore
import WAFProxyLoop
import WAFProxyLoopTestKit

/// The relay's TLS upstream, in memory: the loop's client session against a libssl server, with a
/// throw-away CA and certificate made once by the openssl command line.
enum TLSUpstream {
    private static let contexts: (server: TLSServerContext, client: TLSClientContext) = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waf-fuzz-tls-\(getpid())")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl(directory, ["req", "-x509"] + curve + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=fuzz CA"])
        openssl(directory, ["req"] + curve + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try! "subjectAltName=DNS:localhost\n".write(to: directory.appendingPathComponent("san.ext"), atomically: true, encoding: .utf8)
        openssl(
            directory,
            [
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
                "-extfile", "san.ext",
            ])
        let server = TLSServerContext(
            certificateChain: directory.appendingPathComponent("server.pem").path, key: directory.appendingPathComponent("server.key").path)!
        let client = try! TLSClientContext(caFile: directory.appendingPathComponent("ca.pem").path)
        return (server, client)
    }()

    /// openssl in `directory` (`env -C`), by posix_spawn: Foundation's `Process` leaks a weak
    /// reference that the leak checker would report as the input's.
    private static func openssl(_ directory: URL, _ arguments: [String]) {
        let argv = (["/usr/bin/env", "-C", directory.path, "/usr/bin/openssl"] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        precondition(posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, environ) == 0, "cannot start openssl")
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        precondition(status == 0, "openssl \(arguments[0]) failed")
    }

    /// A session whose handshake is done.
    private static func connected() -> (TLSClientSession, TLSServerPeer) {
        let client = try! TLSClientSession(contexts.client, serverName: "localhost")
        let server = TLSServerPeer(contexts.server)
        client.start()
        _ = server.exchange(with: client)
        guard client.handshakeDone, client.status == .open else { violated("the handshake with the in-memory server did not complete") }
        return (client, server)
    }

    static func fuzz(_ input: [UInt8], cut: Int, forged: Bool) {
        // Within what the memory BIO pair holds at once (17 KiB): a larger write would wait for a reader.
        let bytes = Array(input.prefix(8192))
        let (client, server) = connected()
        var received = ByteBuffer()
        if forged {
            // Bytes that are not the server's records: never plaintext, whatever they hold.
            let at = cut % (bytes.count + 1)
            client.receive(ByteBuffer(bytes: bytes[..<at]))
            client.receive(ByteBuffer(bytes: bytes[at...]))
            client.read(into: &received)
            if received.readableBytes > 0 { violated("forged records gave \(received.readableBytes) bytes of plaintext") }
            return
        }
        // The server's answer, its records cut in three where the input says.
        server.write(bytes)
        var records = server.takeCiphertext()
        let count = records.readableBytes
        let first = count == 0 ? 0 : cut % (count + 1), second = count == 0 ? 0 : (cut >> 3) % (count - first + 1)
        for length in [first, second, count - first - second] where length > 0 {
            client.receive(records.readSlice(length: length)!)
            client.read(into: &received)
        }
        if Array(received.readableBytesView) != bytes {
            violated("the server's \(bytes.count) bytes arrived as \(received.readableBytes) when its records were cut at \(first), \(second)")
        }
        if client.status != .open { violated("a session that only read the server's records is \(client.status)") }
    }
}
