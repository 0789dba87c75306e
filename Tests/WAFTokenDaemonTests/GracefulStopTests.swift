import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM as a restart sends it, against connections in every state a consumer may be in when it
/// comes (docs/systemd.md, "Restarts that consumers do not see"). Each connection is a raw socket,
/// so that a clean close (end of file) and a reset are told apart as a client's kernel tells them.
@Suite("Graceful stop", .offPool, .serialized, .timeLimit(.minutes(3)))
struct GracefulStopTests {
    static func get(_ path: String) -> String { "GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n" }

    /// A kept-alive connection with one answer behind it, as a client between requests holds it.
    static func keptAlive(_ path: String, first request: String) throws -> RawSocket {
        let socket = try RawSocket(path: path)
        socket.send(get(request))
        let answer = socket.nextResponse(timeout: .seconds(10))
        #expect(answer?.status == 200, "the warm-up answer: \(answer?.text ?? "none")")
        return socket
    }

    @Test(
        "SIGTERM: requests on kept-alive connections answered with Connection: close, idle ones closed cleanly, the stream ended, a refresh wait gets the cached token, exit 0"
    )
    func underWayAtTheStop() async throws {
        let proxySocket = try scratchDirectory("waf-stop").appendingPathComponent("proxy.sock").path
        try await withDaemon(daemon: ["--proxy-listen", proxySocket], naming: { ["--proxy-upstream", $0.origin] }) { service, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let api = try (0..<3).map { _ in try Self.keptAlive(daemon.socketPath, first: "/v1/token") }
            let proxy = try Self.keptAlive(proxySocket, first: "/protected/warm")
            let idle = try Self.keptAlive(daemon.socketPath, first: "/v1/token")
            let stream = try RawSocket(path: daemon.socketPath)
            stream.send(Self.get("/v1/events"))
            #expect(String(decoding: stream.receive(timeout: .milliseconds(500)).bytes, as: UTF8.self).contains("event: token"))
            // A refresh under way when the stop comes: the token service takes 8 s to answer.
            try await service.setLatency(milliseconds: 8000)
            let refreshing = try RawSocket(path: daemon.socketPath)
            refreshing.send("POST /v1/refresh?wait=30 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
            try await Task.sleep(for: .milliseconds(300))

            daemon.signal(SIGTERM)
            // The stop has begun once both socket files are gone; the drain window runs.
            #expect(
                await eventually(for: .seconds(5)) {
                    !FileManager.default.fileExists(atPath: daemon.socketPath) && !FileManager.default.fileExists(atPath: proxySocket)
                }, "the listeners stopped accepting")

            // A request sent now (a client under load sends its next at once) is answered, and the
            // answer says the connection closes; then it does, cleanly.
            // All at once: each has only the drain window (250 ms) from the stop, however late a
            // loaded machine runs this test.
            let asked = api.map({ ($0, "/v1/token") }) + [(proxy, "/protected/after")]
            for (socket, path) in asked { socket.send(Self.get(path)) }
            for (socket, path) in asked {
                let answer = socket.nextResponse(timeout: .seconds(5))
                #expect(answer?.status == 200, "\(path): \(answer?.text ?? "no answer") \(daemon.stderr.suffix(3000))")
                #expect(answer?.text.lowercased().contains("\r\nconnection: close\r\n") == true, "\(path): \(answer?.text ?? "")")
                #expect(socket.ending(timeout: .seconds(5)) == .closed, "\(path): a clean close after the answer")
            }
            // Idle past the drain window: closed cleanly; a request that crosses that close is
            // read and dropped (end of file), not answered with a reset.
            #expect(idle.ending(timeout: .seconds(5)) == .closed, "an idle kept-alive connection is closed cleanly")
            #expect(idle.send(Self.get("/v1/token")), "the closing side still reads")
            #expect(idle.ending(timeout: .seconds(5)) == .closed, "a request that crossed the close meets end of file, not a reset")
            // The event stream ends with its last chunk.
            let rest = stream.receive(timeout: .seconds(5))
            #expect(rest.closed && String(decoding: rest.bytes, as: UTF8.self).hasSuffix("0\r\n\r\n"), "the stream ends with the last chunk")
            // The refresh wait: at the stop's deadline, what the daemon has (the cached token).
            let refreshed = refreshing.nextResponse(timeout: .seconds(10))
            #expect(refreshed?.status == 200, "\(refreshed?.text ?? "no answer")")
            #expect(refreshed?.text.contains(token.value) == true, "the cached token")
            #expect(await daemon.waitForExit() == 0)
        }
    }
}
