#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.1 exchange with the daemon over its Unix socket, with the system's calls on the
/// calling thread: no event loop, no concurrency runtime. For a command that asks once and exits
/// (`waf-tokenctl token`, which scripts call in loops): the NIO client's event loops and tasks
/// cost more than the exchange itself. The daemon answers with `Content-Length` and closes
/// (`Connection: close`), so the answer ends at end of file.
public enum BlockingExchange {
    /// The answer's status and body, or the client's error: `unreachable` when the socket cannot
    /// be reached, `timedOut` when no whole answer came within `timeout`.
    public static func get(_ path: String, socketPath: String, accept: String, timeout: Duration) throws(WAFTokenClientError) -> (UInt, [UInt8]) {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .unreachable("socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socketPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .unreachable("\(socketPath): the path is too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        // One deadline for the whole exchange. The connect too waits (for room in a daemon's full
        // backlog, as when it stops accepting at its descriptor limit): SO_SNDTIMEO bounds it.
        let deadline = now() + UInt64(max(0, timeout.nanoseconds))
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            if errno == EAGAIN || errno == EINPROGRESS { throw .timedOut("the daemon did not take the connection within \(timeout)") }
            throw .unreachable("connect to \(socketPath): \(String(cString: strerror(errno)))")
        }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: \(accept)\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            guard try ready(descriptor, for: Int16(POLLOUT), by: deadline, timeout) else { break }
            let count = request[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            // The daemon may answer and close before all of it is written: the answer counts.
            guard count > 0 else { break }
            sent += count
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // A daemon that drips its answer a byte at a time is bound by the deadline too.
            guard try ready(descriptor, for: Int16(POLLIN), by: deadline, timeout) else {
                throw .timedOut("the daemon did not answer within \(timeout)")
            }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                answer += chunk[..<count]
                guard answer.count <= DaemonConnection.maximumBody + 64 * 1024 else { throw .badResponse("an answer over 1 MiB") }
                continue
            }
            if count == 0 { break }
            if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
            throw .unreachable("read from \(socketPath): \(String(cString: strerror(errno)))")
        }
        return try parse(answer)
    }

    /// Whether `descriptor` is ready for `events` before `deadline` (false: the time is up).
    private static func ready(_ descriptor: Int32, for events: Int16, by deadline: UInt64, _ timeout: Duration) throws(WAFTokenClientError) -> Bool {
        while true {
            let current = now()
            guard current < deadline else { return false }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let milliseconds = Int32(clamping: (deadline - current + 999_999) / 1_000_000)
            let count = poll(&entry, 1, milliseconds)
            if count > 0 { return true }
            if count == 0 { continue }
            guard errno == EINTR else { throw .unreachable("poll: \(String(cString: strerror(errno)))") }
        }
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// The status and body of a whole answer (`Content-Length`, or up to the end).
    static func parse(_ answer: [UInt8]) throws(WAFTokenClientError) -> (UInt, [UInt8]) {
        guard let end = answer.firstRange(of: [13, 10, 13, 10]) else {
            throw .badResponse("the connection closed before the answer was complete")
        }
        let lines = String(decoding: answer[..<end.lowerBound], as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let words = lines.first?.split(separator: " ", maxSplits: 2) ?? []
        guard words.count >= 2, words[0].hasPrefix("HTTP/1."), let status = UInt(words[1]) else {
            throw .badResponse("not an HTTP answer")
        }
        var body = Array(answer[end.upperBound...])
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "content-length" else { continue }
            guard let length = Int(String(line[line.index(after: colon)...].filter { $0 != " " && $0 != "\t" })), length <= body.count else {
                throw .badResponse("the connection closed before the answer was complete")
            }
            body = Array(body.prefix(length))
        }
        return (status, body)
    }
}
