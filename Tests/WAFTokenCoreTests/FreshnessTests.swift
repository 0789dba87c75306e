import Foundation
import Testing
@testable import WAFTokenCore
import WAFTokenCoreTestKit
import WAFTestTraits

@Suite("Freshness (TOK-7)", .offPool, .timeLimit(.minutes(1)))
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
}
