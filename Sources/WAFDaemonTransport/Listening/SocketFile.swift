import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// The socket's path: made room for, and told apart from one a live daemon serves.
package enum SocketFile {
    /// Makes room for the socket: creates its directory, replaces a stale socket file left by a
    /// crash, and refuses to take a path that a live daemon serves or that is not a socket.
    package static func prepare(_ path: String) async throws(ListenerFailure) {
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw ListenerFailure("cannot inspect \(path): \(String(cString: strerror(errno)))") }
            let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
            if !directory.isEmpty, mkdir(directory, 0o755) != 0, errno != EEXIST {
                throw ListenerFailure("cannot create the socket's directory \(directory): \(String(cString: strerror(errno)))")
            }
            return
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ListenerFailure("\(path) exists and is not a socket; not replacing it")
        }
        switch await probe(path) {
        case .served:
            throw ListenerFailure("\(path) is in use by a running daemon; not taking it over")
        case .unknown(let error):
            throw ListenerFailure("cannot tell whether \(path) is in use (\(error)); not replacing it")
        case .stale:
            break
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ListenerFailure("cannot remove the stale socket \(path): \(String(cString: strerror(errno)))")
        }
    }

    package enum Probe {
        case served
        case stale
        case unknown(any Error)
    }

    /// Whether something accepts connections on `path`. Only a refused connection proves a stale
    /// file; any other failure (no permission, say) leaves the question open.
    package static func probe(_ path: String) async -> Probe {
        do {
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(2))
                .connect(unixDomainSocketPath: path).get()
            try? await channel.close()
            return .served
        } catch let error as IOError where error.errnoCode == ECONNREFUSED || error.errnoCode == ENOENT {
            return .stale
        } catch {
            return .unknown(error)
        }
    }
}
