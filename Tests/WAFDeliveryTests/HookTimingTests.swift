import Dispatch
import Logging
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

/// A hook that hangs delays no refresh: the provider's schedule, in virtual time, is the same with
/// a delivery action that never returns as without one.
@Suite("Delivery: never in the provider's way", .offPool, .timeLimit(.minutes(1)))
struct HookTimingTests {
    @Test("HOOK5: while a delivery action hangs, the provider refreshes on its schedule (virtual time), and its token is read at once")
    func HOOK5_hangingHookDelaysNoRefresh() throws {
        let scheduler = VirtualScheduler()
        let service = ScriptedTokenFetcher(scheduler: scheduler)
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let provider = WAFTokenProvider(
            configuration: try WAFConfiguration(
                applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com"),
            fetcher: service, scheduler: scheduler, options: .init(jitter: false, logger: quiet))
        let release = DispatchSemaphore(value: 0)
        let started = NIOLockedValueBox(0)
        let runner = HookRunner(
            actions: [.run(["/bin/hang"])],
            perform: { _, _ in
                started.withLockedValue { $0 += 1 }
                release.wait()
            }, report: { _ in })
        provider.observe { event in
            if case .tokenUpdated(let token, .fetched) = event { runner.tokenArrived(token.value) }
        }
        scheduler.runUntilIdle()
        for second in stride(from: 0, through: 1000, by: 50) {
            scheduler.advance(to: MonotonicInstant(sinceOrigin: .seconds(Int64(second))))
            #expect(provider.getToken() != nil)
        }
        #expect(service.callTimes == [0, 300, 600, 900].map { Duration.seconds($0) }, "the same schedule as without a hook")
        #expect(provider.getToken()?.value == "token-4")
        // The runs are on the runner's own thread: wait (bounded) for the first to start.
        let clock = ContinuousClock()
        var deadline = clock.now + .seconds(10)
        while started.withLockedValue({ $0 }) < 1, clock.now < deadline { usleep(10_000) }
        #expect(started.withLockedValue { $0 } == 1, "one run, still hanging: the later tokens wait behind it, as the latest only")
        release.signal()
        deadline = clock.now + .seconds(10)
        while started.withLockedValue({ $0 }) < 2, clock.now < deadline { usleep(10_000) }
        #expect(started.withLockedValue { $0 } == 2, "then one run, with the latest token")
        release.signal()
        runner.waitForRuns()
        #expect(started.withLockedValue { $0 } == 2, "and no more")
    }
}
