import Foundation
import Testing
import WAFJSON
import WAFTestSupport
import WAFTestTraits

@Suite("Several providers: who may use which", .offPool, .timeLimit(.minutes(2)))
struct ProvidersAccessTests {
    @Test(
        "MULTI-7: a peer outside a provider's allowedUsers gets 403 for it, does not see it listed, streamed or named, and its proxy refuses the peer; the other provider serves it"
    )
    func MULTI7_perProviderAccess() async throws {
        let proxy = try scratchDirectory("waf-providers-access").appendingPathComponent("pay.sock").path
        try await withTwoProviders(
            configuration:
                "    allowedUsers: [root]\n    proxy:\n      listen: \(proxy)\n      mode: \"0666\"\n      upstream: http://127.0.0.1:9/\n",
            arguments: ["--socket-mode", "0666"]
        ) { _, _, daemon in
            let pay = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay").body)?["value"]?.string)
            _ = try await curl(daemon.socketPath, "/v1/token?wait=10")
            for path in [
                "/v1/token?provider=pay", "/v1/token?domain=pay.example.org", "/v1/cookie?provider=pay", "/v1/status?provider=pay",
                "/readyz?provider=pay",
            ] {
                let refused = try await curlAs(uid: nobody, daemon.socketPath, path)
                #expect(
                    refused.code == 403 && json(refused.body)?["error"]?.string == "forbidden" && !refused.body.contains(pay), "\(path): \(refused)")
            }
            #expect(try await curlAs(uid: nobody, daemon.socketPath, "/v1/refresh?provider=pay", ["-X", "POST"]).code == 403)
            #expect(try await curlAs(uid: nobody, daemon.socketPath, "/v1/token").code == 200, "the other provider serves it")
            let listed = try await curlAs(uid: nobody, daemon.socketPath, "/v1/providers")
            #expect(listed.code == 200 && listed.body.contains(#""provider":"default""#) && !listed.body.contains("pay"), "\(listed.body)")
            let status = try await curlAs(uid: nobody, daemon.socketPath, "/v1/status")
            #expect(status.code == 200 && !status.body.contains("pay"))
            // A name it may not use and a name no provider has look the same to it (TENANT-7).
            let unknown = try await curlAs(uid: nobody, daemon.socketPath, "/v1/token?provider=nope")
            let forbidden = try await curlAs(uid: nobody, daemon.socketPath, "/v1/token?provider=pay")
            #expect(unknown.code == 403 && unknown == forbidden && !unknown.body.contains("pay"), "the choices named are its own: \(unknown.body)")
            #expect(try await curlAs(uid: 0, daemon.socketPath, "/v1/token?provider=nope").code == 404, "to a peer that may use every provider")
            let stream = try await curlAs(uid: nobody, daemon.socketPath, "/v1/events", ["-N", "--max-time", "1"])
            #expect(stream.body.contains(#""provider":"default""#) && !stream.body.contains("pay"), "\(stream.body)")
            #expect(try await curlAs(uid: nobody, daemon.socketPath, "/v1/events?provider=pay").code == 403)
            // Its proxy takes the provider's lists.
            #expect(try await curlAs(uid: nobody, proxy, "/protected/x").code == 403)
            // root may.
            #expect(try await curlAs(uid: 0, daemon.socketPath, "/v1/token?provider=pay").code == 200)
            #expect(try await curlAs(uid: 0, daemon.socketPath, "/v1/providers").body.contains(#""provider":"pay""#))
        }
    }
}
