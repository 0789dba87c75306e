import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// Short timeouts, so that the tests of slow and silent clients are quick.
private let timeouts = ["--socket-idle-timeout-sec", "1", "--socket-request-timeout-sec", "2"]

@Suite("Bad input on the socket", .offPool, .timeLimit(.minutes(2)))
struct BadInputTests {
    @Test(
        "malformed requests, unknown paths and methods, odd versions: a 4xx or 505 each, never a crash",
        arguments: [
            ("GARBAGE\r\n\r\n", 400),
            ("GET /v1/token HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n", 400),
            ("GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404),
            ("DELETE /v1/token HTTP/1.1\r\nHost: x\r\n\r\n", 405),
            ("POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405),
            ("GET /v1/token HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            ("GET /v1/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            ("PUT /v1/lifecycle HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + String(repeating: "a", count: 20000), 413),
        ])
    func malformed(request: String, status: Int) async throws {
        try await withDaemon(daemon: timeouts) { _, daemon in
            let socket = try RawSocket(path: daemon.socketPath)
            socket.send(request)
            let answer = socket.response(timeout: .seconds(3))
            #expect(answer.status == status, "\(request.prefix(60).debugDescription) → \(answer.text.prefix(80).debugDescription)")
            if status != 404 && status != 405 { #expect(json(String(answer.text.split(separator: "\r\n\r\n").last ?? ""))?["error"] != nil) }
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200, "others are still served")
        }
    }

    @Test("a 64 KiB head gets 431, on a fresh connection and on one already past its first request")
    func hugeHeaders() async throws {
        try await withDaemon(daemon: timeouts) { _, daemon in
            let big = "GET /v1/token HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 64 * 1024) + "\r\n\r\n"
            let fresh = try RawSocket(path: daemon.socketPath)
            fresh.send(big)
            let first = fresh.response(timeout: .seconds(3))
            #expect(first.status == 431)
            #expect(first.closed)

            let used = try RawSocket(path: daemon.socketPath)
            used.send("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(used.response(timeout: .milliseconds(500)).status == 200)
            used.send(big)
            #expect(used.response(timeout: .seconds(3)).status == 431)
        }
    }

    @Test("a client that connects and sends nothing is cut off after the idle timeout")
    func silentClient() async throws {
        try await withDaemon(daemon: timeouts) { _, daemon in
            let socket = try RawSocket(path: daemon.socketPath)
            let (bytes, closed) = socket.receive(timeout: .seconds(5))
            #expect(closed && bytes.isEmpty)
        }
    }

    @Test("a client that drips a byte at a time gets 408 after the request timeout, head or body")
    func drippingClient() async throws {
        try await withDaemon(daemon: timeouts) { _, daemon in
            let head = try RawSocket(path: daemon.socketPath)
            let started = ContinuousClock.now
            for byte in "GET /v1/status HTTP/1.1\r\nHost: x\r\n".utf8 {
                if !head.send([byte]) { break }
                if head.receive(timeout: .milliseconds(200)).closed { break }
                if ContinuousClock.now - started > .seconds(6) { break }
            }
            let answer = head.response(timeout: .seconds(3))
            #expect(answer.text.contains("408") || answer.closed, "\(answer.text)")
            #expect(ContinuousClock.now - started < .seconds(6))

            let body = try RawSocket(path: daemon.socketPath)
            body.send("PUT /v1/lifecycle HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nback")
            #expect(body.response(timeout: .seconds(5)).status == 408)
        }
    }

    @Test("pipelined requests are answered in order, on the fast path and across the switch to the codec")
    func pipelining() async throws {
        try await withDaemon(daemon: timeouts) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let socket = try RawSocket(path: daemon.socketPath)
            socket.send(
                "GET /v1/token HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/token HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/token HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let (bytes, closed) = socket.receive(timeout: .seconds(3))
            let text = String(decoding: bytes, as: UTF8.self)
            let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
            #expect(statuses == ["200", "200", "200", "200"])
            let bodies = text.components(separatedBy: "\r\n\r\n")
            #expect(bodies[1].hasPrefix("{\"ageSeconds\""))
            #expect(bodies[2].hasPrefix(json(bodies[1].components(separatedBy: "HTTP/1.1")[0])?["value"]?.string ?? "?"))
            #expect(bodies[3].hasPrefix(#"{"status":"ok"}"#))
            #expect(closed, "Connection: close is honoured")
        }
    }

    @Test("2,000 simultaneous connections: the daemon keeps serving others and cuts the idle ones off")
    func manyConnections() async throws {
        // Timeouts long enough that all 2,000 are still open while the test looks, however slowly
        // a loaded machine gets there (with 10 s, a run beside two builds saw the first ones cut
        // off before the last were accepted); short enough for the crowd's 60 s to see them cut off.
        // The connection limits above the crowd: what they do has tests of its own (TENANT-6).
        let limits = ["--socket-max-connections", "4096", "--socket-max-connections-per-user", "4096"]
        try await withDaemon(daemon: ["--socket-idle-timeout-sec", "30", "--socket-request-timeout-sec", "30"] + limits) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            // The connections live in a child process: 2,000 descriptors in the test process would
            // exceed what fd_set-based code in Foundation can hold.
            let crowd = try ConnectionCrowd(socket: daemon.socketPath, count: 2000)
            #expect(await onOwnThread { crowd.waitUntilOpen() })
            #expect(try await curl(daemon.socketPath, "/v1/token").code == 200, "served while 2,000 others are open")
            #expect(try await daemon.client.getToken() != nil)
            // Connected is not yet accepted: the daemon takes them off the backlog in its own time
            // (8 s once ran out under a loaded fresh-clone run that then saw all 2,000 answered).
            // The counter is of open connections: all 2,000 at once, none cut off yet.
            #expect(
                await eventually(for: .seconds(30)) {
                    (try? await status(daemon))?["counters"]?["connections"]?.integer.map { $0 >= 2000 } == true
                }, "all 2,000 accepted")
            let outcome = try #require(await onOwnThread { crowd.finish() })
            #expect(outcome["answered"] == .number(400), "every request sent was answered (200), or timed out (408)")
            #expect(outcome["cutOff"] == .number(2000), "every connection was closed by the daemon in the end")
            #expect(daemon.process.isRunning)
            #expect(try await curl(daemon.socketPath, "/healthz").code == 200)
        }
    }
}

/// A Python child that opens `count` connections: one in ten asks for a token and keeps the
/// connection, one in ten sends half a request, the rest say nothing. Told to finish, it reports
/// how many got their answer and how many the daemon closed. Used from one test at a time.
private final class ConnectionCrowd: @unchecked Sendable {
    static let script = #"""
        import json, resource, socket, sys, time
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        path, count = sys.argv[1], int(sys.argv[2])
        sockets = []
        for i in range(count):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            if i % 10 == 0: s.sendall(b"GET /v1/token HTTP/1.1\r\nHost: x\r\n\r\n")
            elif i % 10 == 1: s.sendall(b"GET /v1/sta")
            sockets.append(s)
        print("open", flush=True)
        sys.stdin.readline()
        answered = closed = 0
        deadline = time.time() + 60
        for i, s in enumerate(sockets):
            data, ended = b"", False
            s.settimeout(max(0.05, deadline - time.time()))
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        ended = True
                        break
                    data += chunk
            except socket.timeout:
                pass
            if (i % 10 == 0 and data.startswith(b"HTTP/1.1 200")) or (i % 10 == 1 and data.startswith(b"HTTP/1.1 408")):
                answered += 1
            closed += ended
        print(json.dumps({"answered": answered, "cutOff": closed}), flush=True)
        """#

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(socket: String, count: Int) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, socket, String(count)]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    func waitUntilOpen() -> Bool {
        line() == "open"
    }

    func finish() -> JSONValue? {
        input.fileHandleForWriting.write(Data("\n".utf8))
        defer { process.waitUntilExit() }
        return line().flatMap { JSONValue.parse(Array($0.utf8)) }
    }

    private func line() -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(output.fileHandleForReading.fileDescriptor, &byte, 1)
            if count < 0, errno == EINTR { continue }
            guard count == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
