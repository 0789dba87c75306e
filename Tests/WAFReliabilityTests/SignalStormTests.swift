import Foundation
import Testing
import WAFChallenge
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits

@Suite("Reliability: signal storms", .offPool, .serialized, .timeLimit(.minutes(15)))
struct SignalStormTests {
    @Test(
        "LIFE-2 and RELOAD-1 under a storm of mixed SIGUSR1, SIGUSR2 and SIGHUP: never two fetches in flight, no burst of requests, the right state after it"
    )
    func RELOAD1_signalStorm() async throws {
        let signals = Scale.pick(2000, full: 10_000)
        try await withDaemon(daemon: ["--log-level", "warning"], executable: Scale.daemon) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            let before = try await service.counters()
            let pid = daemon.process.processIdentifier
            let kinds = [SIGUSR1, SIGUSR2, SIGHUP]
            let clock = ContinuousClock()
            let started = clock.now
            for index in 0..<signals { kill(pid, kinds[(index * 7 + index / 3) % 3]) }
            let took = clock.now - started
            // Standard signals pending together are delivered by number, SIGUSR1 before SIGUSR2,
            // whatever order they were sent in: the last word is only the last once the storm has
            // been taken in (a loaded fresh-clone run once ended the storm in the wrong state).
            #expect(await eventually(for: .seconds(30)) { ProcessReadings.nothingPending(pid) }, "the storm's signals taken in")
            _ = try await curl(daemon.socketPath, "/v1/status")
            kill(pid, SIGUSR1)
            #expect(await lifecycleBecomes(daemon, "foreground"))
            try await Task.sleep(for: .seconds(1))
            let after = try await service.counters()
            let calls = (after.inputs - before.inputs)
            let health = try await curl(daemon.socketPath, "/healthz")
            Scale.report(
                "\(signals) mixed signals in \(Int((took / .milliseconds(1)).rounded())) ms: \(calls) token-service calls during and after the storm, at most \(after.maxCallsInFlight) in flight, /healthz \(health.code)"
            )
            #expect(after.maxCallsInFlight <= 1)
            #expect(calls <= 4, "a storm of signals is no storm of requests")
            #expect(health.code == 200)
            #expect(daemon.process.isRunning)
        }
    }
}

@Suite("Reliability: the token service's faults in every lifecycle state", .offPool, .serialized, .timeLimit(.minutes(30)))
struct FaultMatrixTests {
    static let faults: [FaultRule.Kind] = [.fail, .drop, .malformed, .expired, .stall, .oversized, .trickle]

    @Test(
        "TOK-5 and LIFE-2 for every fault and lifecycle state: the last good token is served, nothing is fetched of its own while inactive, never two at once"
    )
    func TOK5_faultsInEveryLifecycleState() async throws {
        let states = Scale.full ? ["foreground", "background", "closed"] : ["foreground", "background"]
        var rows: [String] = []
        for fault in Self.faults {
            for state in states {
                try await withDaemon(
                    daemon: ["--log-level", "error", "--token-service-timeout-sec", "1", "--max-error-token-refresh-delay-msec", "200"],
                    executable: Scale.daemon
                ) { service, daemon in
                    let good = try await daemon.client.tokenReady(wait: .seconds(10))
                    _ = try await daemon.client.setLifecycle(state)
                    try await service.arm(FaultRule(kind: fault, target: fault == .expired ? .verify : .any, count: 3, status: 503))
                    let before = try await service.counters()
                    // A forced refresh meets the faults; in the background nothing else may ask.
                    let refreshed = try? await daemon.client.refresh(wait: .seconds(15))
                    try await Task.sleep(for: .seconds(2))
                    let after = try await service.counters()
                    let served = try await daemon.client.getToken()
                    let ownCalls = (after.inputs - before.inputs)
                    rows.append(
                        "\(fault.rawValue)/\(state): \(ownCalls) calls, max \(after.maxCallsInFlight) in flight, new token \(refreshed != nil)")
                    #expect(after.maxCallsInFlight <= 1, "\(fault) \(state)")
                    #expect(served != nil && (served?.value == good.value || served?.value == refreshed?.value), "\(fault) \(state): TOK-5")
                    if state != "foreground" {
                        // Only the forced refresh and its retries: nothing once it is answered.
                        let settled = try await service.counters()
                        try await Task.sleep(for: .seconds(1))
                        #expect(try await service.counters().inputs == settled.inputs, "\(fault) \(state): LIFE-2")
                    }
                }
            }
        }
        Scale.report("fault matrix: " + rows.joined(separator: "; "))
    }
}
