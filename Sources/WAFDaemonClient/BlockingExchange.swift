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

    /// The status and body of a whole answer (`Content-Length`, or up to the end). Read on the
    /// bytes themselves: `String`'s splitting and Foundation's searches instantiate generic types
    /// whose conformances the runtime looks up in the binary's tables, a cost this one-exchange
    /// command paid on every run (docs/performance.md, "Start-up in detail").
    static func parse(_ answer: [UInt8]) throws(WAFTokenClientError) -> (UInt, [UInt8]) {
        try answer.withUnsafeBufferPointer { bytes throws(WAFTokenClientError) in
            var end = 0
            while end + 3 < bytes.count, !(bytes[end] == 13 && bytes[end + 1] == 10 && bytes[end + 2] == 13 && bytes[end + 3] == 10) { end += 1 }
            guard end + 3 < bytes.count else { throw .badResponse("the connection closed before the answer was complete") }
            // The status line: `HTTP/1.x`, a space, the status code, then a space or the line's end.
            let lineEnd = Self.lineEnd(bytes, from: 0, before: end)
            let version = Array("HTTP/1.".utf8)
            guard lineEnd > version.count, bytes[..<version.count].elementsEqual(version), let space = bytes[..<lineEnd].firstIndex(of: 32),
                let status = Self.number(bytes[(space + 1)..<(bytes[(space + 1)..<lineEnd].firstIndex(of: 32) ?? lineEnd)])
            else { throw .badResponse("not an HTTP answer") }
            var bodyLength = bytes.count - (end + 4)
            var line = lineEnd + 2
            while line < end {
                let next = Self.lineEnd(bytes, from: line, before: end)
                defer { line = next + 2 }
                guard let colon = bytes[line..<next].firstIndex(of: 58), Self.isContentLength(bytes[line..<colon]) else { continue }
                // Blanks anywhere in the value are dropped, as a lenient reader does.
                guard let length = Self.number(bytes[(colon + 1)..<next], skippingBlanks: true), length <= bodyLength else {
                    throw .badResponse("the connection closed before the answer was complete")
                }
                bodyLength = Int(length)
            }
            return (status, Array(bytes[(end + 4)..<(end + 4 + bodyLength)]))
        }
    }

    /// Where the line that starts at `start` ends (its CR), at `limit` at most.
    private static func lineEnd(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, before limit: Int) -> Int {
        var index = start
        while index < limit, !(bytes[index] == 13 && bytes[index + 1] == 10) { index += 1 }
        return index
    }

    /// A decimal number of at most 18 digits; nil for anything else (`skippingBlanks`: spaces and
    /// tabs between the digits are left out).
    private static func number(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, skippingBlanks: Bool = false) -> UInt? {
        var value: UInt = 0
        var digits = 0
        for byte in bytes {
            if skippingBlanks, byte == 32 || byte == 9 { continue }
            guard byte >= 48, byte <= 57, digits < 18 else { return nil }
            value = value * 10 + UInt(byte - 48)
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    private static func isContentLength(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        let expected = Array("content-length".utf8)
        // Case folded for letters only: folded, a CR would pass for the `-`.
        return name.count == expected.count
            && zip(name, expected).allSatisfy { $0 == $1 || ($1 >= UInt8(ascii: "a") && $1 <= UInt8(ascii: "z") && $0 | 0x20 == $1) }
    }
}
