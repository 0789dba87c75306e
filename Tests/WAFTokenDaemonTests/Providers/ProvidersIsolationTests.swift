import Foundation
import Testing
import WAFJSON
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits

@Suite("Several providers: one's failure is its own", .offPool, .timeLimit(.minutes(2)))
struct ProvidersIsolationTests {
    /// The seconds curl took for each of `count` requests to `path`.
    static func timings(_ daemon: DaemonProcess, _ path: String, _ options: [String] = [], count: Int) async throws -> [Double] {
        var times: [Double] = []
        for _ in 0..<count {
            let result = try await run(
                "/usr/bin/curl",
                ["-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--unix-socket", daemon.socketPath] + options + [
                    "http://localhost\(path)"
                ])
            let parts = result.stdout.split(separator: " ")
            #expect(parts.first == "200", "\(path): \(result.stdout)")
            times.append(parts.last.flatMap { Double($0) } ?? .infinity)
        }
        return times
    }

    @Test(
        "MULTI-8: while one provider's token service hangs or fails, the other's token, refresh and ?wait= answers take as long as before",
        arguments: [FaultRule.Kind.stall, .fail])
    func MULTI8_oneFailingProviderDelaysNoOther(fault: FaultRule.Kind) async throws {
        // tokenService.timeoutSec 5: a hanging fetch of default's holds its single flight for 5 s a try.
        try await withTwoProviders(arguments: ["--token-service-timeout-sec", "5"]) { first, second, daemon in
            _ = try await curl(daemon.socketPath, "/v1/token?wait=10")
            _ = try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay")
            let before = try await Self.timings(daemon, "/v1/refresh?provider=pay", ["-X", "POST"], count: 8)
            try await first.arm(FaultRule(kind: fault, target: .any, count: 1000, status: 503))
            // default starts a refresh that hangs (or fails and retries); pay is asked meanwhile.
            _ = try await curl(daemon.socketPath, "/v1/refresh?wait=0.2", ["-X", "POST"])
            let during = try await Self.timings(daemon, "/v1/refresh?provider=pay", ["-X", "POST"], count: 8)
            let reads = try await Self.timings(daemon, "/v1/token?provider=pay&wait=5", count: 8)
            let status = json(try await curl(daemon.socketPath, "/v1/status").body)
            let p99 = { (values: [Double]) in values.sorted().last ?? .infinity }
            print(
                "figure: \(fault) of default: pay's refresh p99 \(Int(p99(before) * 1000)) ms before, \(Int(p99(during) * 1000)) ms during; its ?wait= reads p99 \(Int(p99(reads) * 1000)) ms"
            )
            // A refresh of pay's costs a fetch (~10 ms here); a wait behind default's 5 s fetch would be seconds.
            #expect(p99(during) < max(3 * p99(before), 0.5), "before \(before), during \(during)")
            #expect(p99(reads) < 0.5, "\(reads)")
            #expect(
                status?["providers"]?["default"]?["refresh"]?["inFlight"] == .bool(true)
                    || status?["providers"]?["default"]?["refresh"]?["consecutiveFailures"]?.integer ?? 0 > 0)
            let secondCounters = try await second.counters()
            #expect(secondCounters.maxCallsInFlight <= 1, "pay: one fetch at a time")
        }
    }
}
