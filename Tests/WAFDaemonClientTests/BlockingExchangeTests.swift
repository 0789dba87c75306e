import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

@testable import WAFDaemonClient

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokenctl token`'s exchange without an event loop (BlockingExchange): one deadline from the
/// connect to the answer's last byte, whatever the daemon does, so that a script's loop never
/// hangs on it.
@Suite("The blocking exchange's one deadline", .offPool)
struct BlockingExchangeTests {
    /// A listening Unix socket in a scratch directory; its descriptor and path.
    static func listener(backlog: Int32) throws -> (Int32, String) {
        let path = try scratchDirectory("waf-exchange").appendingPathComponent("s.sock").path
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(descriptor, backlog) == 0, "the test's listener: errno \(errno)")
        return (descriptor, path)
    }

    /// Runs the exchange on a thread of its own; its outcome and how long it took, or nil if it
    /// had not returned within 10 s (the bug this guards against: it never returns).
    static func exchange(_ path: String, timeout: Duration) -> (Result<(UInt, [UInt8]), WAFTokenClientError>, Duration)? {
        let outcome = LockedBox<(Result<(UInt, [UInt8]), WAFTokenClientError>, Duration)?>(nil)
        let done = DispatchSemaphore(value: 0)
        startThread {
            let start = ContinuousClock.now
            let result = Result { () throws(WAFTokenClientError) in
                try BlockingExchange.get("/v1/token", socketPath: path, accept: "text/plain", timeout: timeout)
            }
            outcome.set((result, ContinuousClock.now - start))
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { return nil }
        return outcome.get()
    }

    @Test("A daemon whose backlog is full: the connect gives up at the deadline, saying so")
    func fullBacklog() throws {
        let (listening, path) = try Self.listener(backlog: 0)
        defer { close(listening) }
        // Never accepted: they fill the backlog, and the next connect waits for room.
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<4 {
            let filler = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            fillers.append(filler)
        }
        let outcome = try #require(Self.exchange(path, timeout: .milliseconds(500)), "the exchange returned within 10 s")
        guard case .failure(.timedOut(let said)) = outcome.0 else {
            Issue.record("not a time-out: \(outcome.0)")
            return
        }
        #expect(said.contains("within"), "\(said)")
        #expect(outcome.1 < .seconds(3), "it took \(outcome.1)")
    }

    @Test("A daemon that drips its answer a byte at a time: the exchange ends at its deadline, not at the answer's end")
    func drippedAnswer() throws {
        let (listening, path) = try Self.listener(backlog: 8)
        let stop = LockedBox(false)
        let served = DispatchSemaphore(value: 0)
        startThread {
            let connection = accept(listening, nil, nil)
            var request = [UInt8](repeating: 0, count: 4096)
            _ = recv(connection, &request, request.count, 0)
            for byte in Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx".utf8) where !stop.get() {
                var one = byte
                _ = send(connection, &one, 1, Int32(MSG_NOSIGNAL))
                usleep(200_000)
            }
            close(connection)
            served.signal()
        }
        let outcome = try #require(Self.exchange(path, timeout: .seconds(1)), "the exchange returned within 10 s")
        stop.set(true)
        _ = served.wait(timeout: .now() + 5)
        close(listening)
        guard case .failure(.timedOut) = outcome.0 else {
            Issue.record("not a time-out: \(outcome.0)")
            return
        }
        #expect(outcome.1 < .seconds(3), "it took \(outcome.1): the answer's drip, not the deadline")
    }
}

/// The answer's status and body, read on its bytes: as the earlier reader on `String`s read them.
@Suite("The blocking exchange's reading of an answer", .offPool)
struct BlockingExchangeParseTests {
    static func parsed(_ answer: String) -> Result<(UInt, String), WAFTokenClientError> {
        Result { () throws(WAFTokenClientError) in
            let (status, body) = try BlockingExchange.parse(Array(answer.utf8))
            return (status, String(decoding: body, as: UTF8.self))
        }
    }

    @Test(
        "status and body: Content-Length in any case and with blanks, none (to the end), several (each in turn)",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef", 200, "abc"),
            ("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-LENGTH:\t 2 \r\n\r\nxyz", 503, "xy"),
            ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it\r\n", 200, "all of it\r\n"),
            ("HTTP/1.0 204\r\n\r\n", 204, ""),
            ("HTTP/1.1 200 OK\r\n\r\n", 200, ""),
            ("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 2\r\n\r\nabcd", 200, "ab"),
            ("HTTP/1.1 404 Not Found\r\nX-Content-Length: 1\r\nContent-Lengths: 1\r\n\r\nnone", 404, "none"),
            ("HTTP/1.1 200 OK\r\nContent\rLength: 1\r\n\r\nnot one", 200, "not one"),
        ])
    func reads(answer: String, status: UInt, body: String) throws {
        let (readStatus, readBody) = try Self.parsed(answer).get()
        #expect(readStatus == status && readBody == body, "\(answer.debugDescription)")
    }

    @Test(
        "an answer cut short or not HTTP is a bad response, saying which",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "closed before"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2", "closed before"),
            ("", "closed before"),
            ("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nabc", "closed before"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc", "closed before"),
            ("SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer"),
            ("HTTP/1.1 abc\r\n\r\n", "not an HTTP answer"),
            ("HTTP/1.1\r\n\r\n", "not an HTTP answer"),
            ("HTTP/2 200\r\n\r\n", "not an HTTP answer"),
        ])
    func refuses(answer: String, said: String) {
        guard case .failure(.badResponse(let message)) = Self.parsed(answer) else {
            Issue.record("\(answer.debugDescription) was read: \(Self.parsed(answer))")
            return
        }
        #expect(message.contains(said), "\(message)")
    }
}

/// A value behind a lock, for a test's threads.
final class LockedBox<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    func get() -> Value { lock.withLock { value } }
    func set(_ new: Value) { lock.withLock { value = new } }
}
