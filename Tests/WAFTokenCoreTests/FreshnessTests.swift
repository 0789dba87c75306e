import Foundation
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Freshness (TOK-7, TOK-9)", .offPool, .timeLimit(.minutes(1)))
struct FreshnessTests {
    @Test("TOK-7: with jitter off the refresh falls due exactly at tokenRefreshDelaySec, and the token stays fresh while it runs")
    func TOK7_freshDuringTheRoutineRefresh() throws {
        let harness = Harness(latency: .seconds(2))
        harness.advance(to: 2)
        harness.advance(to: 302)
        #expect(harness.service.callTimes == seconds(0, 302))
        harness.advance(to: 303)
        let cached = try #require(harness.provider.cachedToken())
        #expect(cached.token.value == "token-1")
        #expect(cached.age == .seconds(301))
        #expect(!cached.stale, "older than the delay, but its refresh is in its first attempt")
        #expect(harness.provider.status().token?.stale == false)
        harness.advance(to: 304)
        #expect(harness.provider.cachedToken()?.token.value == "token-2")
    }

    @Test("TOK-7: an active provider whose service answers never reads stale, with jitter or without")
    func TOK7_neverStaleWhileTheServiceAnswers() {
        for (jitter, unit) in [(false, 1.0), (true, 0.0), (true, 0.5), (true, 1.0)] {
            let harness = Harness(latency: .seconds(3), jitter: jitter, randomUnit: { unit })
            var staleAt: [Double] = []
            for tenth in 31...36_000 {  // an hour, every 100 ms, from the first token on
                harness.advance(to: Double(tenth) / 10)
                if harness.provider.cachedToken()?.stale != false { staleAt.append(Double(tenth) / 10) }
            }
            #expect(staleAt.isEmpty, "jitter \(jitter) unit \(unit): stale at \(staleAt.prefix(5))")
            #expect(harness.service.callCount >= 12)
        }
    }

    @Test("TOK-7: no older than tokenRefreshDelaySec is fresh; the first instant after it is stale once the refresh failed")
    func TOK7_boundaryIsNoOlderThanTheDelay() throws {
        let harness = Harness(script: [.success], then: .fail(ScriptedTokenFetcher.outage))
        harness.advance(to: 300)
        #expect(harness.service.callTimes == seconds(0, 300), "the refresh fell due and failed at once")
        #expect(try #require(harness.provider.cachedToken()).age == .seconds(300))
        #expect(harness.provider.cachedToken()?.stale == false, "exactly tokenRefreshDelaySec old: no older than it")
        harness.scheduler.advance(to: MonotonicInstant(sinceOrigin: .seconds(300) + .nanoseconds(1)))
        #expect(harness.provider.cachedToken()?.stale == true)
        #expect(harness.provider.status().token?.stale == true)
    }

    @Test("TOK-7: a failure before the token turns old leaves it fresh until then")
    func TOK7_failureBeforeTheDelay() {
        let harness = Harness(script: [.success] + failures(30), jitter: true, randomUnit: { 0 })
        harness.advance(to: 270)
        #expect(harness.service.callTimes.last == .seconds(270), "jitter pulled the refresh to 0.9 × the delay")
        harness.advance(to: 299)
        #expect(harness.provider.cachedToken()?.stale == false)
        harness.advance(to: 301)
        #expect(harness.provider.cachedToken()?.stale == true)
    }

    @Test("TOK-7: a refresh held while the app is inactive makes the token stale once old, until a new one comes")
    func TOK7_heldRefreshIsStale() {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 301.5)
        #expect(harness.provider.status().refresh.held)
        #expect(harness.provider.cachedToken()?.stale == true)
        harness.setLifecycle(.foreground)
        #expect(harness.provider.cachedToken()?.stale == true, "the refresh starts, but the token already went stale")
        harness.advance(to: 303)
        #expect(harness.provider.cachedToken()?.stale == false)
        #expect(harness.provider.cachedToken()?.token.value == "token-2")
    }

    @Test("TOK-9: after an hour's sleep the token is stale at once, before any timer has fired; the due refresh runs on waking")
    func TOK9_suspendCounts() throws {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 100)
        #expect(harness.service.callTimes == seconds(0), "token-1 at 1 s; its refresh is due at 301 s")
        harness.scheduler.suspend(for: .seconds(3600))
        // Waking: every clock moved on, and nothing has run yet.
        let woken = try #require(harness.provider.cachedToken())
        #expect(woken.age == .seconds(3699))
        #expect(woken.stale, "its due refresh has not started: an hour-old token is not reported fresh")
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 3700), "the refresh runs on waking, not an hour late")
        #expect(harness.provider.cachedToken()?.stale == false, "its refresh in its first attempt (TOK-7)")
        harness.advance(to: 3701)
        #expect(harness.provider.cachedToken()?.token.value == "token-2")
        #expect(harness.provider.cachedToken()?.stale == false)
    }

    @Test("TOK-9: a refresh that starts late by less than the tolerance keeps the token fresh; by more, the token reads stale until it starts")
    func TOK9_lateTimerTolerance() throws {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 300.9)
        // The process is held for half a second across the refresh's due time (301 s): a late timer.
        harness.scheduler.suspend(for: .milliseconds(500))
        #expect(harness.provider.cachedToken()?.stale == false, "300.4 s old, its refresh 0.4 s late: within the tolerance")
        harness.scheduler.suspend(for: .milliseconds(700))
        #expect(harness.provider.cachedToken()?.stale == true, "301.1 s old, its refresh 1.1 s late and not started")
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 302.1))
        #expect(harness.provider.cachedToken()?.stale == false)
    }

    @Test("TOK-9: inactive through a long sleep, the token is stale on waking and refresh is paused once the pause timer runs")
    func TOK9_suspendWhileInactive() throws {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 10)
        harness.setLifecycle(.background)
        harness.scheduler.suspend(for: .seconds(7200))
        #expect(harness.provider.cachedToken()?.stale == true)
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.status().lifecycle.paused)
        #expect(harness.service.callTimes == seconds(0), "nothing fetched while inactive (LIFE-2)")
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0, 7210), "refreshed at once on return (LIFE-4)")
    }
}
