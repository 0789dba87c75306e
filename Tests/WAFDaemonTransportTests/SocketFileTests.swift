import Foundation
import NIOCore
import NIOPosix
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport

/// A socket path left by a crash is replaced; one a live daemon serves is not.
@Suite("The socket file", .offPool)
struct SocketFileTests {
    static func path() -> String { NSTemporaryDirectory() + "waf-socket-file-\(UUID().uuidString.prefix(8)).sock" }

    @Test("Nothing there, or a socket file nobody listens on: stale, and prepare makes room")
    func stale() async throws {
        let missing = Self.path()
        #expect(await SocketFile.probe(missing).isStale)
        let left = Self.path()
        // Bound, listened on, closed without unlinking: the file a crashed daemon leaves.
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        let bound = try SocketAddress(unixDomainSocketPath: left).withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        #expect(bound == 0 && listen(descriptor, 1) == 0)
        close(descriptor)
        #expect(FileManager.default.fileExists(atPath: left))
        #expect(await SocketFile.probe(left).isStale)
        try await SocketFile.prepare(left)
        #expect(!FileManager.default.fileExists(atPath: left), "the stale file is gone")
    }

    @Test("A socket something listens on, even with its backlog full: served, and prepare refuses it")
    func served() async throws {
        let path = Self.path()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group).serverChannelOption(.backlog, value: 0)
            .serverChannelOption(.autoRead, value: false)
            .bind(unixDomainSocketPath: path).get()
        #expect(await SocketFile.probe(path).isServed)
        // Fill the backlog: the connections are never accepted (no reads on the listener).
        var held: [Int32] = []
        for _ in 0..<4 { held.append(try Self.connectNonBlocking(path)) }
        defer { held.forEach { close($0) } }
        #expect(await SocketFile.probe(path).isServed, "a full backlog is still a listener")
        await #expect(throws: ListenerFailure.self) { try await SocketFile.prepare(path) }
        try await channel.close()
        try await group.shutdownGracefully()
    }

    @Test("TENANT11: the socket's mode is set on the socket itself, never through a link in its place")
    func TENANT11_modeNotThroughLinks() throws {
        let path = Self.path()
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        defer { close(descriptor) }
        #expect(try SocketAddress(unixDomainSocketPath: path).withSockAddr { bind(descriptor, $0, socklen_t($1)) } == 0)
        #expect(SocketFile.setMode(path, 0o660))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o660)
        // A link where the socket was: the file it points to keeps its mode.
        let target = NSTemporaryDirectory() + "waf-socket-file-target-\(UUID().uuidString.prefix(8))"
        _ = FileManager.default.createFile(atPath: target, contents: Data("secret".utf8), attributes: [.posixPermissions: 0o600])
        let link = Self.path()
        #expect(symlink(target, link) == 0)
        #expect(!SocketFile.setMode(link, 0o666))
        #expect(stat(target, &info) == 0 && info.st_mode & 0o777 == 0o600, "the link's target is untouched")
        unlink(link)
        unlink(target)
        unlink(path)
    }

    static func connectNonBlocking(_ path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        _ = try SocketAddress(unixDomainSocketPath: path).withSockAddr { connect(descriptor, $0, socklen_t($1)) }
        return descriptor
    }
}

extension SocketFile.Probe {
    var isStale: Bool { if case .stale = self { true } else { false } }
    var isServed: Bool { if case .served = self { true } else { false } }
}
