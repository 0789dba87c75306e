import Foundation
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// A test-owned `NOTIFY_SOCKET`: an AF_UNIX datagram socket, at a path or at an abstract name
/// (`@name`), collecting every message a daemon sends with `sd_notify`, with when it arrived.
public final class NotifySocket: @unchecked Sendable {
    public struct Message: Sendable {
        public let text: String
        public let at: ContinuousClock.Instant
        /// The message's assignments, `READY` → `1`.
        public var fields: [String: String] {
            Dictionary(
                text.split(separator: "\n").compactMap { line in
                    let parts = line.split(separator: "=", maxSplits: 1)
                    return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
                }, uniquingKeysWith: { _, last in last })
        }
    }

    /// What to put in `NOTIFY_SOCKET`.
    public let address: String
    private let descriptor: Int32
    private let lock = NSLock()
    private var received: [Message] = []
    private var open = true

    /// `abstract`: an abstract-namespace socket (`@name`) instead of a path in the temp directory.
    public init(abstract: Bool) throws {
        let name = "waf-notify-\(UUID().uuidString.prefix(8))"
        let path = abstract ? name : FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        address = abstract ? "@" + name : path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let offset = abstract ? 1 : 0  // abstract names start with a NUL byte
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in
            raw.copyBytes(from: [UInt8](repeating: 0, count: raw.count))
            for (index, byte) in bytes.enumerated() { raw[index + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + offset + (abstract ? 0 : 1))
        let result = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard result == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        startThread { [self] in receive() }
    }

    deinit {
        close()
    }

    /// Stops listening; the receiving thread closes the descriptor, so that it is never closed
    /// under a poll that is still using it.
    public func close() {
        let wasOpen = lock.withLock { () -> Bool in
            defer { open = false }
            return open
        }
        if wasOpen, !address.hasPrefix("@") { unlink(address) }
    }

    public var messages: [Message] { lock.withLock { received } }

    /// Waits (bounded) for a message that `matches`, and returns it.
    public func wait(timeout: Duration = .seconds(20), for matches: (Message) -> Bool) async -> Message? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let found = messages.first(where: matches) { return found }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while lock.withLock({ open }) {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { continue }
            let message = Message(text: String(decoding: buffer.prefix(count), as: UTF8.self), at: .now)
            lock.withLock { received.append(message) }
        }
        Glibc.close(descriptor)
    }
}
