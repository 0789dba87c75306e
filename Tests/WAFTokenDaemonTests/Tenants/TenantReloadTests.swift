import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// TENANT-3 with the real daemon: access decided again after a reload, for what stays open.
@Suite("Tenants across a reload", .offPool, .timeLimit(.minutes(2)))
struct TenantReloadTests {
    @Test(
        "TENANT3: a reload that takes a peer's access to pay away ends its pay event stream, and its kept-alive proxy connection gets Connection: close, then 403"
    )
    func TENANT3_accessDecidedAgain() async throws {
        let directory = try scratchDirectory("waf-tenant-reload")
        chmod(directory.path, 0o755)
        let upstream = try await ScriptedUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let proxy = directory.appendingPathComponent("pay.sock").path
        let entry = { (users: String) in
            "    allowedUsers: [\(users)]\n    proxy:\n      listen: \(proxy)\n      mode: \"0666\"\n      upstream: \(upstream.origin)\n"
        }
        do {
            try await check(upstream: upstream, proxy: proxy, directory: directory, entry: entry)
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    private func check(upstream: ScriptedUpstream, proxy: String, directory: URL, entry: (String) -> String) async throws {
        try await withTwoProviders(configuration: entry("root, nobody"), arguments: ["--socket-mode", "0666"]) { first, second, daemon in
            _ = try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay")
            // nobody's stream of pay's events, and its kept-alive connection to pay's proxy.
            let output = directory.appendingPathComponent("stream.txt").path
            let stream = try SpawnedProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/curl", "-sN", "--max-time", "60", "--unix-socket",
                    daemon.socketPath, "http://localhost/v1/events?provider=pay",
                ], output: output)
            #expect(await eventually { (try? String(contentsOfFile: output, encoding: .utf8))?.contains("event: token") == true })
            let client = try NobodyConnection(path: proxy)
            #expect(client.request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")?.hasPrefix("HTTP/1.1 200") == true)

            let file = daemon.directory.appendingPathComponent("daemon.yaml").path
            try (twoProvidersFile(first: first, second: second) + entry("root")).write(toFile: file, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            #expect(await stream.waitForExit(timeout: .seconds(10)) != nil, "the stream of a provider the peer may no longer use ends")
            // A new token of pay now reaches no stream of nobody's.
            _ = try await curl(daemon.socketPath, "/v1/refresh?provider=pay", ["-X", "POST"])
            let seen = try String(contentsOfFile: output, encoding: .utf8)
            #expect(seen.components(separatedBy: "event: token").count == 2, "one token event, the one before the reload: \(seen)")
            let after = client.request("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(after == nil || after?.hasPrefix("HTTP/1.1 403") == true, "the kept-alive connection is checked again: \(after ?? "closed")")
        }
    }
}

/// A kept-alive connection as `nobody`, in a child process (a socket's peer is the process that
/// opened it): one request per line of stdin, each answer's first line back.
final class NobodyConnection: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe(), output = Pipe()

    static let script = #"""
        import socket, sys
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
        for line in sys.stdin:
            s.sendall(line.strip().encode().decode("unicode_escape").encode())
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = s.recv(65536)
                    if not chunk: break
                    data += chunk
            except OSError:
                pass
            print(data.split(b"\r\n")[0].decode() if data else "CLOSED", flush=True)
        """#

    init(path: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/python3", "-c", Self.script, path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    deinit {
        process.terminate()
    }

    /// The first line of the answer to `request`, nil when the connection was closed instead.
    func request(_ request: String) -> String? {
        let escaped = request.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
        input.fileHandleForWriting.write(Data((escaped + "\n").utf8))
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line += byte
        }
        let text = String(decoding: line, as: UTF8.self)
        return text == "CLOSED" || text.isEmpty ? nil : text
    }
}
