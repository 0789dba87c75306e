import Foundation
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Loading tokens (OBJ-3, TOK-8)", .offPool, .timeLimit(.minutes(1)))
struct LoadingTests {
    private static let origin = Date(timeIntervalSince1970: 1_700_000_000)

    /// As seconds since 1970: a NaN `Date` cannot even be printed (FoundationEssentials traps).
    @Test(
        "TOK-8: a fetch time in the future, before 2020 or no date at all makes the token stale at once, refreshed at once, and nothing traps",
        arguments: [
            1_700_003_600, 1_920_000_000, 1_577_836_799, 0, Date.distantPast.timeIntervalSince1970, -62_135_596_800,
            Date.distantFuture.timeIntervalSince1970, .nan, .infinity, -.infinity, -.greatestFiniteMagnitude, .greatestFiniteMagnitude,
        ])
    func TOK8_untrustedFetchTimes(secondsSince1970: Double) throws {
        let fetchedAt = Date(timeIntervalSince1970: secondsSince1970)
        let harness = Harness(latency: .seconds(1), restoredToken: .init(value: "restored", fetchedAt: fetchedAt))
        harness.scheduler.runUntilIdle()
        let cached = try #require(harness.provider.cachedToken())
        #expect(cached.token.value == "restored")
        #expect(cached.stale)
        #expect(harness.provider.status().token?.stale == true)
        #expect(harness.service.callTimes == seconds(0), "refreshed at once")
        harness.advance(to: 1)
        #expect(harness.provider.cachedToken()?.token.value == "token-1")
        #expect(harness.provider.cachedToken()?.stale == false)
    }

    @Test("TOK-8: a restored token older than tokenRefreshDelaySec is stale at once, refreshed at once; one exactly that old is not stale")
    func TOK8_restoredTokenAgeBoundary() {
        let old = Harness(latency: .seconds(1), restoredToken: .init(value: "old", fetchedAt: Self.origin.addingTimeInterval(-301)))
        old.scheduler.runUntilIdle()
        #expect(old.service.callTimes == seconds(0))
        #expect(old.provider.cachedToken()?.stale == true, "loaded as stale, not fresh while its refresh runs")
        let edge = Harness(latency: .seconds(1), restoredToken: .init(value: "edge", fetchedAt: Self.origin.addingTimeInterval(-300)))
        edge.scheduler.runUntilIdle()
        #expect(edge.service.callTimes == seconds(0), "due at once")
        #expect(edge.provider.cachedToken()?.stale == false, "no older than tokenRefreshDelaySec, its refresh in its first attempt")
    }

    @Test("TOK-8: a wall clock centuries off neither trusts a token nor traps")
    func TOK8_absurdWallClock() {
        let harness = Harness(
            latency: .seconds(1), restoredToken: .init(value: "restored", fetchedAt: Date(timeIntervalSince1970: 1_700_000_000)),
            wallClockOrigin: Date(timeIntervalSince1970: 1e11))
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.cachedToken()?.stale == true)
        #expect(harness.service.callTimes == seconds(0))
    }

    @Test("TOK-8: 2020-01-01 is trusted, one second before it is not")
    func TOK8_the2020Boundary() {
        let now = Date(timeIntervalSince1970: 1_577_836_860)  // 2020-01-01T00:01:00Z
        let trusted = Harness(restoredToken: .init(value: "new-year", fetchedAt: Date(timeIntervalSince1970: 1_577_836_800)), wallClockOrigin: now)
        trusted.scheduler.runUntilIdle()
        #expect(trusted.provider.cachedToken()?.stale == false)
        #expect(trusted.provider.cachedToken()?.age == .seconds(60))
        #expect(trusted.service.callCount == 0)
        let untrusted = Harness(
            latency: .seconds(1), restoredToken: .init(value: "old-year", fetchedAt: Date(timeIntervalSince1970: 1_577_836_799)),
            wallClockOrigin: now)
        untrusted.scheduler.runUntilIdle()
        #expect(untrusted.provider.cachedToken()?.stale == true)
        #expect(untrusted.service.callCount == 1)
    }

    @Test("TOK-8: a loaded token never replaces a cached one fetched later; a later one does")
    func TOK8_neverReplacesALaterToken() {
        let harness = Harness()
        harness.advance(to: 100)
        harness.provider.loadTokenIntoProvider("newer", fetchedAt: Self.origin.addingTimeInterval(60))
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken()?.value == "newer", "fetched at 60 s, after token-1 at 0 s")
        #expect(harness.provider.cachedToken()?.age == .seconds(40))
        harness.provider.loadTokenIntoProvider("older", fetchedAt: Self.origin.addingTimeInterval(50))
        harness.provider.loadTokenIntoProvider("same-time", fetchedAt: Self.origin.addingTimeInterval(60))
        harness.provider.loadTokenIntoProvider("future", fetchedAt: Self.origin.addingTimeInterval(500))
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken()?.value == "newer")
        // Refreshed on the schedule of a token fetched at 60 s.
        harness.advance(to: 359)
        #expect(harness.service.callTimes == seconds(0))
        harness.advance(to: 360)
        #expect(harness.service.callTimes == seconds(0, 360))
    }

    @Test("TOK-8: a load while a fetch is in flight cancels nothing and answers no waiter with the older token")
    func TOK8_loadDuringAFetch() {
        let harness = Harness(latency: .seconds(2))
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.advance(to: 1)
        harness.provider.loadTokenIntoProvider("from-elsewhere", fetchedAt: Self.origin.addingTimeInterval(0.5))
        harness.advance(to: 1.5)
        #expect(recorder.count == 0, "waiters wait for what the fetch brings")
        #expect(harness.provider.getToken()?.value == "from-elsewhere")
        harness.advance(to: 2)
        #expect(recorder.tokens == ["token-1"])
        #expect(harness.service.callTimes == seconds(0))
        #expect(harness.provider.getToken()?.value == "token-1")
    }

    @Test("TOK-8: a stale load while retries are under way changes nothing about them")
    func TOK8_staleLoadKeepsTheRetries() {
        let harness = Harness(then: .fail(ScriptedTokenFetcher.outage))
        harness.advance(to: 0.35)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3))
        harness.provider.loadTokenIntoProvider("old", fetchedAt: Self.origin.addingTimeInterval(-1000))
        harness.advance(to: 1.5)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5))
        #expect(harness.provider.cachedToken()?.stale == true)
    }

    @Test("OBJ-3: a fresh load while idle-retrying resets the failure count and schedules the periodic refresh")
    func OBJ3_freshLoadEndsTheRetries() {
        let harness = Harness(script: failures(2))
        harness.advance(to: 0.15)
        #expect(harness.service.callTimes == seconds(0, 0.1))
        harness.provider.loadTokenIntoProvider("handed-in")
        harness.advance(to: 299)
        #expect(harness.service.callTimes == seconds(0, 0.1))
        #expect(harness.provider.status().refresh.consecutiveFailures == 0)
        harness.advance(to: 300.15)
        #expect(harness.service.callTimes == seconds(0, 0.1, 300.15))
    }

    @Test(
        "RET-1, RET-6: a token loaded while a fetch is in flight is no success: when that fetch fails, the backoff goes on and the failures still count"
    )
    func RET6_loadDuringAFailingFetchIsNoSuccess() {
        let harness = Harness(then: .fail(ScriptedTokenFetcher.outage), latency: .seconds(1))
        // Attempts at 0, 1.1 (after 100 ms), 2.3 (after 200 ms); each fails a second later.
        harness.advance(to: 2.5)
        #expect(harness.service.callTimes == seconds(0, 1.1, 2.3))
        harness.provider.loadTokenIntoProvider("handed-in")
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken()?.value == "handed-in", "cached at once")
        harness.advance(to: 3.3)
        let status = harness.provider.status()
        #expect(status.refresh.consecutiveFailures == 3, "the third failure counts on from two, not from a reset")
        // RET-1: the third retry waits 400 ms, not the first retry's 100 ms.
        harness.advance(to: 3.65)
        #expect(harness.service.callTimes == seconds(0, 1.1, 2.3))
        harness.advance(to: 3.7)
        #expect(harness.service.callTimes == seconds(0, 1.1, 2.3, 3.7))
    }
}
