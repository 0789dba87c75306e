import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A bare Unix stream socket, for what no HTTP client sends: malformed requests, huge heads,
/// silence, a byte a second.
public final class RawSocket: @unchecked Sendable {
    public let descriptor: Int32
    /// Bytes received beyond the last complete response (`nextResponse`).
    private var pending: [UInt8] = []

    public init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw POSIXError(.ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        // No close here: an initializer that throws once every property is set still runs deinit,
        // and a second close would hit whatever descriptor took the number in between (another
        // test's pipe: this is how a daemon start, polling with failing connects, crossed them).
        guard result == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    deinit { Glibc.close(descriptor) }

    /// Sends everything; false if the peer closed first.
    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Reads until the peer closes or `timeout` passes without anything new.
    public func receive(timeout: Duration) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, milliseconds) > 0 else { return (received, false) }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (received, true) }
            received += buffer.prefix(count)
        }
    }

    /// How a connection ended, as its client sees it.
    public enum Ending: Equatable, Sendable {
        /// A clean close: end of file after everything sent.
        case closed
        /// The peer reset it (ECONNRESET): what it had not read was thrown away.
        case reset
        /// Still open when the time was up.
        case open
    }

    /// Reads (and drops) until the connection ends or `timeout` passes.
    public func ending(timeout: Duration) -> Ending {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return .open }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            guard poll(&poller, 1, milliseconds) > 0 else { return .open }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return .closed }
            if count < 0 { return errno == EINTR ? ending(timeout: deadline - ContinuousClock.now) : .reset }
        }
    }

    /// The status code of the first response in what arrives within `timeout`, and whether the
    /// daemon then closed the connection.
    public func response(timeout: Duration = .seconds(10)) -> (status: Int?, text: String, closed: Bool) {
        let (bytes, closed) = receive(timeout: timeout)
        let text = String(decoding: bytes, as: UTF8.self)
        let status = text.hasPrefix("HTTP/1.") ? Int(text.dropFirst(9).prefix(3)) : nil
        return (status, text, closed)
    }

    /// The next complete response (its head, and a body of its Content-Length), nil when none is
    /// complete within `timeout`. Bytes of later responses are kept for the next call.
    public func nextResponse(timeout: Duration) -> (status: Int, text: String)? {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let (status, length) = Self.completeResponse(in: pending) {
                let text = String(decoding: pending.prefix(length), as: UTF8.self)
                pending.removeFirst(length)
                return (status, text)
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            guard poll(&poller, 1, milliseconds) > 0 else { return nil }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            pending += buffer.prefix(count)
        }
    }

    /// The status and total length of the first response in `bytes`, if it is all there.
    private static func completeResponse(in bytes: [UInt8]) -> (status: Int, length: Int)? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 4, let end = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(separator) }) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self)
        guard head.hasPrefix("HTTP/1."), let status = Int(head.dropFirst(9).prefix(3)) else { return nil }
        let length =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let total = end + 4 + length
        return bytes.count >= total ? (status, total) : nil
    }
}
