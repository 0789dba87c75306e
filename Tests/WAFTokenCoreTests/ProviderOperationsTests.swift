import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Provider operations the daemon relies on", .offPool, .timeLimit(.minutes(1)))
struct ProviderOperationsTests {
    private static let origin = Date(timeIntervalSince1970: 1_700_000_000)

    @Test("a restored fresh token is served at once and refreshed tokenRefreshDelaySec after its fetch")
    func restoredFreshToken() throws {
        let harness = Harness(restoredToken: .init(value: "restored", fetchedAt: Self.origin.addingTimeInterval(-100)))
        harness.scheduler.runUntilIdle()
        let cached = try #require(harness.provider.cachedToken())
        #expect(cached.token.value == "restored")
        #expect(cached.age == .seconds(100))
        #expect(!cached.stale)
        #expect(harness.service.callCount == 0)
        harness.advance(to: 200)
        #expect(harness.service.callTimes == seconds(200))
    }

    @Test("a restored old token is served as stale and refreshed at once")
    func restoredStaleToken() throws {
        let harness = Harness(restoredToken: .init(value: "restored", fetchedAt: Self.origin.addingTimeInterval(-3600)))
        #expect(harness.provider.cachedToken() == nil, "nothing before the start job ran")
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0))
        #expect(harness.provider.getToken()?.value == "token-1")
    }

    @Test("a reload of the same identity keeps the token and the schedule; new values apply from the next wait on")
    func reconfigureSameIdentity() {
        let harness = Harness()
        harness.advance(to: 100)
        harness.provider.reconfigure(.test(tokenRefreshDelaySec: 600), lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        harness.advance(to: 299)
        #expect(harness.service.callTimes == seconds(0))
        #expect(harness.provider.getToken()?.value == "token-1")
        harness.advance(to: 1000)
        #expect(harness.service.callTimes == seconds(0, 300, 900))
    }

    @Test("reconfiguring to another domain drops the token and fetches anew")
    func reconfigureNewIdentity() throws {
        let harness = Harness()
        harness.advance(to: 100)
        let other = try WAFConfiguration(
            applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/",
            domainName: "other.example.org")
        harness.provider.reconfigure(other, lifecycleProfile: .ios, jitter: false, cookieSecure: true)
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 100))
        #expect(harness.provider.getToken()?.value == "token-2")
        let cookie = harness.provider.cookieManager.currentCookie
        #expect(cookie?.domain == ".other.example.org")
        #expect(cookie?.secure == true)
    }

    @Test("switching the profile to android while in the background resumes refreshing")
    func reconfigureProfile() {
        let harness = Harness()
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 400)
        #expect(harness.service.callTimes == seconds(0))
        harness.provider.reconfigure(.test(), lifecycleProfile: .android, jitter: false, cookieSecure: false)
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 400))
    }

    @Test("shutdown stops timers and fetches, answers waiters, and ends event streams")
    func shutdownStopsEverything() async {
        let harness = Harness(latency: .seconds(1))
        let stream = harness.provider.events(bufferingPolicy: .unbounded)
        harness.advance(to: 1)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.refreshToken(recorder.callback)
        harness.provider.shutdown()
        harness.advance(to: 10_000)
        #expect(harness.service.callTimes == seconds(0, 1))
        #expect(recorder.errorNames == ["unexpected"])
        #expect(harness.provider.status().refresh.state == .idle)
        #expect(harness.provider.getToken()?.value == "token-1")
        #expect(harness.events.tokens == ["token-1"])
        let ended = await within(.seconds(10)) { for await _ in stream {} }
        #expect(ended, "the event stream ends at shutdown")
        harness.provider.shutdown()
    }

    @Test("status reports lifecycle, refresh, token and counters")
    func statusSnapshot() throws {
        let harness = Harness(script: [.success, .fail(ScriptedTokenFetcher.outage)])
        harness.advance(to: 300.05)
        let status = harness.provider.status()
        #expect(status.refresh.state == .retrying)
        #expect(status.refresh.consecutiveFailures == 1)
        let nextAt = try #require(status.refresh.nextAt)
        #expect(abs(nextAt.timeIntervalSince(Self.origin.addingTimeInterval(300.1))) < 1e-6)
        #expect(status.counters == .init(fetchAttempts: 2, fetchSuccesses: 1, fetchFailures: 1, callbackFailures: 0))
        let token = try #require(status.token)
        #expect(token.fingerprint == WAFToken.fingerprint(of: "token-1"))
        #expect(token.age == .milliseconds(300_050))
        #expect(token.stale)
        #expect(Harness(.test(backgroundRefreshEnabled: false)).provider.status().refresh.state == .disabled)
    }

    @Test("the Dispatch scheduler fires timers in deadline order and never fires a cancelled one")
    func dispatchSchedulerTimers() async {
        let scheduler = DispatchScheduler(label: "test")
        let fired = NIOLockedValueBox<[String]>([])
        let (done, signal) = AsyncStream.makeStream(of: Void.self)
        let cancelled = scheduler.schedule(after: .milliseconds(20)) { fired.withLockedValue { $0.append("cancelled") } }
        _ = scheduler.schedule(after: .milliseconds(40)) {
            fired.withLockedValue { $0.append("second") }
            signal.yield()
        }
        _ = scheduler.schedule(after: .milliseconds(1)) { fired.withLockedValue { $0.append("first") } }
        cancelled.cancel()
        for await _ in done { break }
        #expect(fired.value == ["first", "second"])
        #expect(scheduler.executeAndWait { 42 } == 42)
    }
}
