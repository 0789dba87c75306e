import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

private let outage = ScriptedTokenFetcher.outage

@Suite("Retries", .offPool, .timeLimit(.minutes(1)))
struct RetryTests {
    @Test("RET-1: backoff starts at 100 ms and doubles")
    func RET1_backoffStartsAt100msAndDoubles() {
        let harness = Harness(then: .fail(outage))
        harness.advance(to: 3.1)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1))
    }

    @Test("RET-1: each wait is counted from the end of the failed attempt")
    func RET1_waitCountedFromEndOfFailedAttempt() {
        let harness = Harness(then: .fail(outage), latency: .seconds(1))
        harness.advance(to: 8.1)
        #expect(harness.service.callTimes == seconds(0, 1.1, 2.3, 3.7, 5.5, 8.1))
    }

    @Test("RET-1: no backoff wait exceeds maxErrorTokenRefreshDelayMsec")
    func RET1_backoffCappedAtMaxErrorDelay() {
        let harness = Harness(.test(maxErrorTokenRefreshDelayMsec: 300), then: .fail(outage))
        harness.advance(to: 1.2)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.6, 0.9, 1.2))
        let widest = RetrySchedule(configuration: .test(maxErrorTokenRefreshDelayMsec: 30000), jitter: true, randomUnit: 0)
        #expect(
            (1...10).map(widest.backoff(retry:))
                == [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000].map { Duration.milliseconds($0) })
    }

    @Test("RET-2: after maxRetryCount retries, background refresh waits maxErrorTokenRefreshDelayMsec and goes on until a token comes")
    func RET2_errorPhaseUntilSuccess() {
        let harness = Harness(script: failures(9))
        harness.advance(to: 23.1)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1, 8.1, 13.1, 18.1, 23.1))
        #expect(harness.provider.getToken()?.value == "token-1")
        let status = harness.provider.status()
        #expect(status.refresh.consecutiveFailures == 0)
        #expect(status.refresh.state == .scheduled)
        harness.advance(to: 323.1)
        #expect(harness.service.callTimes.last == .milliseconds(323_100))
    }

    @Test("RET-2: without background refresh, an onTokenReady goes on trying in the error phase too")
    func RET2_onTokenReadyKeepsTryingWithoutBackgroundRefresh() {
        let harness = Harness(.test(backgroundRefreshEnabled: false), script: failures(6))
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.advance(to: 15.7)
        // maxRetryCount is 3 without background refresh.
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 5.7, 10.7, 15.7))
        #expect(recorder.errorNames == ["allRetriesFailed"])
        #expect(harness.scheduler.nextJobTime == nil, "having got a token, on-demand fetching stops")
    }

    @Test("RET-3: waiting callbacks get allRetriesFailed once, the provider keeps trying and announces the token")
    func RET3_waitersToldThenTokenAnnounced() throws {
        let harness = Harness(script: failures(8))
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.advance(to: 3.0)
        #expect(recorder.count == 0)
        harness.advance(to: 3.1)
        #expect(recorder.errorNames == ["allRetriesFailed"])
        #expect(recorder.all.map(\.at) == seconds(3.1))
        #expect(recorder.all.first?.error?.underlying.description == outage.description)

        harness.advance(to: 18.1)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1, 8.1, 13.1, 18.1))
        #expect(recorder.count == 1, "called once only")
        #expect(harness.provider.getToken()?.value == "token-1")

        let seen = harness.events.all.filter { if case .refreshHeld = $0 { false } else { true } }
        try #require(seen.count == 9, "eight failures and a token: \(seen)")
        #expect(seen.prefix(8).allSatisfy { if case .refreshFailed = $0 { true } else { false } })
        guard case .tokenUpdated(let token, .fetched) = seen[8] else {
            Issue.record("expected the token to be announced, got \(seen[8])")
            return
        }
        #expect(token.value == "token-1")

        let later = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(later.callback)
        harness.scheduler.runUntilIdle()
        #expect(later.tokens == ["token-1"])
    }

    @Test("RET-4: on-demand getToken gives up after maxRetryCount retries with the previous token, or nil")
    func RET4_onDemandGivesUpWithPreviousToken() {
        let harness = Harness(.test(backgroundRefreshEnabled: false), script: [.success], then: .fail(outage))
        let first = blocking(harness) { harness.provider.getToken() } ?? nil
        #expect(first?.value == "token-1")
        let second = blocking(harness) { harness.provider.getToken() } ?? nil
        #expect(second?.value == "token-1", "the previous token, not a new one")
        #expect(harness.service.callTimes == seconds(0, 0, 0.1, 0.3, 0.7))
        #expect(harness.scheduler.nextJobTime == nil, "it stopped trying")

        // Stepped job by job, so that the moment of the answer is seen: giving up leaves nothing
        // armed, not even a timer that would wake to find nothing to do.
        let empty = Harness(.test(backgroundRefreshEnabled: false), then: .fail(outage))
        let answers = NIOLockedValueBox<[String?]>([])
        empty.provider.getToken { token in answers.withLockedValue { $0.append(token?.value) } }
        for _ in 0..<100 where answers.withLockedValue({ $0.isEmpty }) {
            empty.scheduler.advanceToNextJob()
        }
        #expect(answers.withLockedValue { $0 } == [nil])
        #expect(empty.service.callCount == 4)
        #expect(empty.scheduler.nextJobTime == nil, "it gave up: no timer left armed")
    }

    @Test("RET-5: maxRetryCount 0 means one attempt and no backoff")
    func RET5_zeroRetries() {
        let onDemand = Harness(.test(backgroundRefreshEnabled: false, maxRetryCount: 0), then: .fail(outage))
        #expect(blocking(onDemand) { onDemand.provider.getToken() } == .some(nil))
        #expect(onDemand.service.callCount == 1)

        let background = Harness(.test(maxRetryCount: 0), then: .fail(outage))
        let recorder = CallbackRecorder(scheduler: background.scheduler)
        background.provider.onTokenReady(recorder.callback)
        background.advance(to: 15)
        #expect(background.service.callTimes == seconds(0, 5, 10, 15))
        #expect(recorder.errorNames == ["allRetriesFailed"])
        #expect(recorder.all.map(\.at) == seconds(0))
    }

    @Test("RET-6: a success resets the retry count and schedules the next refresh tokenRefreshDelaySec later")
    func RET6_successResetsAndSchedules() {
        let harness = Harness(script: failures(3) + [.success] + failures(3))
        harness.advance(to: 601.4)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 300.7, 300.8, 301.0, 301.4, 601.4))
    }

    @Test("RET-7: jitter only shortens the periodic and error-phase waits; backoff stays exact")
    func RET7_jitterOnlyShortens() {
        let shortest = Harness(script: failures(6), jitter: true, randomUnit: { 0 })
        shortest.advance(to: 276)
        #expect(shortest.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1, 5.6, 275.6))

        let longest = Harness(script: failures(6), jitter: true, randomUnit: { 1 })
        longest.advance(to: 309)
        #expect(longest.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1, 8.1, 308.1))

        let off = Harness(script: failures(6), jitter: false, randomUnit: { 0 })
        off.advance(to: 309)
        #expect(off.service.callTimes == longest.service.callTimes)
    }

    @Test("RET-7: jittered waits stay within [0.9, 1.0] and [0.5, 1.0] of their maxima")
    func RET7_jitterBounds() {
        let units = (0...500).map { Double($0) / 500 }
        let schedules = units.map { RetrySchedule(configuration: .test(), jitter: true, randomUnit: $0) }
        let refreshes = schedules.map { $0.refreshWait() }
        let errorWaits = schedules.map { $0.errorPhaseWait() }
        #expect(refreshes.first == .seconds(270) && refreshes.last == .seconds(300))
        #expect(errorWaits.first == .milliseconds(2500) && errorWaits.last == .milliseconds(5000))
        #expect(refreshes.allSatisfy { $0 >= .seconds(270) && $0 <= .seconds(300) })
        #expect(errorWaits.allSatisfy { $0 >= .milliseconds(2500) && $0 <= .milliseconds(5000) })
        #expect(Set(refreshes).count > 1, "jitter is on by default")
        #expect(WAFTokenProviderOptions().jitter)
        // Out-of-range randomness cannot push a wait past its maximum.
        #expect(RetrySchedule(configuration: .test(), jitter: true, randomUnit: 7).refreshWait() == .seconds(300))
        #expect(RetrySchedule(configuration: .test(), jitter: true, randomUnit: -3).refreshWait() == .seconds(270))
        #expect(RetrySchedule(configuration: .test(), jitter: true, randomUnit: .nan).refreshWait() == .seconds(300))
        #expect(RetrySchedule(configuration: .test(), jitter: false, randomUnit: 0).refreshWait() == .seconds(300))
    }

    @Test("RET-8: an explicit request during the error phase starts at once with its own full budget")
    func RET8_explicitRequestRestartsBackoff() {
        let harness = Harness(then: .fail(outage))
        harness.advance(to: 10)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.advance(to: 18.1)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5, 3.1, 8.1, 10, 10.1, 10.3, 10.7, 11.5, 13.1, 18.1))
        #expect(recorder.errorNames == ["allRetriesFailed"])
        #expect(recorder.all.map(\.at) == seconds(13.1))
    }

    @Test("RET-8: a request arriving while a fetch is in flight joins it; its budget starts with that attempt")
    func RET8_joinsFetchInFlight() {
        let harness = Harness(then: .fail(outage), latency: .seconds(1))
        harness.advance(to: 1.5)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.refreshToken(recorder.callback)
        harness.advance(to: 15.2)
        #expect(harness.service.callTimes == seconds(0, 1.1, 2.2, 3.4, 4.8, 6.6, 9.2, 15.2))
        #expect(harness.service.maxInFlight == 1)
        #expect(recorder.all.map(\.at) == seconds(10.2))
        #expect(recorder.errorNames == ["allRetriesFailed"])
    }

    @Test("RET-8: a forced refresh fetches even with a fresh token, which stays cached meanwhile")
    func RET8_forcedRefreshKeepsCachedToken() {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 50)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.refreshToken(recorder.callback)
        harness.advance(to: 50.5)
        #expect(harness.provider.getToken()?.value == "token-1")
        harness.advance(to: 51)
        #expect(recorder.tokens == ["token-2"])
        #expect(harness.service.callTimes == seconds(0, 50))
        harness.advance(to: 351)
        #expect(harness.service.callTimes == seconds(0, 50, 351), "the periodic refresh counts from the forced one")
    }
}
