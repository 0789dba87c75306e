import NIOCore

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

    /// Sets the mode of the socket just bound at `path`, never of what a link there points to:
    /// the path is not followed (`AT_SYMLINK_NOFOLLOW`; glibc does it through the descriptor of
    /// the path itself), and must be a socket. A link swapped in between bind and chmod would
    /// otherwise give the daemon's mode to a file of the attacker's choosing.
    package static func setMode(_ path: String, _ mode: UInt16) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            errno = ENOTSOCK
            return false
        }
        if fchmodat(AT_FDCWD, path, mode_t(mode), AT_SYMLINK_NOFOLLOW) == 0 { return true }
        // A C library or kernel that cannot change a mode without following (glibc before 2.32,
        // or no /proc for its fallback): the path was just seen to be the socket, not a link.
        guard errno == ENOTSUP || errno == EOPNOTSUPP else { return false }
        return chmod(path, mode_t(mode)) == 0
    }

    package enum Probe {
        case served
        case stale
        case unknown(any Error)
    }

    /// Whether something accepts connections on `path`. Only a refused connection proves a stale
    /// file; any other failure (no permission, say) leaves the question open. A plain non-blocking
    /// connect: a Unix socket answers it at once, and a full backlog (EAGAIN) means a listener.
    /// (Through NIO it started the shared event loop group's threads at start-up for this alone.)
    package static func probe(_ path: String) async -> Probe {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .unknown(IOError(errnoCode: errno, reason: "socket")) }
        defer { close(descriptor) }
        let address: SocketAddress
        do {
            address = try SocketAddress(unixDomainSocketPath: path)
        } catch {
            return .unknown(error)
        }
        if address.withSockAddr({ connect(descriptor, $0, socklen_t($1)) }) == 0 { return .served }
        switch errno {
        case ECONNREFUSED, ENOENT: return .stale
        case EAGAIN, EINPROGRESS: return .served
        case let code: return .unknown(IOError(errnoCode: code, reason: "connect"))
        }
    }
}
