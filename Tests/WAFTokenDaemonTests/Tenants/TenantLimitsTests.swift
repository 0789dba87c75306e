import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// TENANT-4 and TENANT-6 with the real daemon: a peer that tries to wear the daemon down.
@Suite("Tenants: wearing the daemon down", .offPool, .timeLimit(.minutes(2)))
struct TenantLimitsTests {
    @Test("TENANT6: past socket.maxConnectionsPerUser a new connection from that uid is closed at once, logged once; others are served")
    func TENANT6_connectionsPerUser() async throws {
        try await withDaemon(daemon: ["--socket-max-connections-per-user", "3"]) { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            var open: [RawSocket] = []
            for _ in 0..<3 {
                // The readiness checks' connections count until the daemon has read their close; on
                // a busy machine that can come after the next connect, which is then refused, as
                // the rule says. Each of the three is served once they are gone.
                #expect(
                    await eventually {
                        guard let socket = try? RawSocket(path: daemon.socketPath), socket.send("GET /healthz HTTP/1.1\r\n\r\n"),
                            socket.nextResponse(timeout: .seconds(10))?.status == 200
                        else { return false }
                        open.append(socket)
                        return true
                    })
            }
            #expect(open.count == 3)
            for _ in 0..<5 {
                let extra = try RawSocket(path: daemon.socketPath)
                _ = extra.send("GET /healthz HTTP/1.1\r\n\r\n")
                let answer = extra.response(timeout: .seconds(10))
                #expect(answer.status == nil && answer.closed, "closed with no answer: \(answer.text)")
            }
            #expect(open.first?.send("GET /healthz HTTP/1.1\r\n\r\n") == true)
            #expect(open.first?.nextResponse(timeout: .seconds(10))?.status == 200, "the open ones are served")
            #expect(daemon.stderr.components(separatedBy: "socket.maxConnectionsPerUser (3) reached").count == 2, "logged once a minute")
            open.removeAll()
            // Closed ones free their places.
            #expect(
                await eventually {
                    let socket = try? RawSocket(path: daemon.socketPath)
                    _ = socket?.send("GET /healthz HTTP/1.1\r\n\r\n")
                    return socket?.nextResponse(timeout: .seconds(2))?.status == 200
                })
        }
    }

    @Test("TENANT6: refused peers are logged once a minute per uid, and their connections close after the 403")
    func TENANT6_refusalsLoggedOnce() async throws {
        try await withDaemon(daemon: ["--socket-allowed-users", "root", "--socket-mode", "0666"]) { _, daemon in
            for _ in 0..<20 {
                let refused = try await curlAs(uid: nobody, daemon.socketPath, "/v1/token")
                #expect(refused.code == 403)
            }
            #expect(daemon.stderr.components(separatedBy: "connection refused by the socket's access policy").count == 2, "\(daemon.stderr)")
        }
    }

    @Test("TENANT4: thirty POST /v1/refresh in a loop are one fetch: the rest get the token fetched last")
    func TENANT4_refreshLoop() async throws {
        let interval = ["--refresh-min-forced-interval-sec", "60"]
        try await withDaemon(daemon: interval) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let before = try await service.counters().tokensIssued
            var values: Set<String> = []
            for _ in 0..<30 {
                let answer = try await curl(daemon.socketPath, "/v1/refresh", ["-X", "POST"])
                #expect(answer.code == 200)
                if let value = json(answer.body)?["value"]?.string { values.insert(value) }
            }
            #expect(try await service.counters().tokensIssued == before + 1, "one fetch")
            #expect(values.count == 1, "each answered with the token fetched last")
            let metrics = try await curl(daemon.socketPath, "/metrics").body
            #expect(metrics.contains(#"waf_tokend_forced_refreshes_total{provider="default",result="limited"} 29"#), "\(metrics)")
        }
    }
}
