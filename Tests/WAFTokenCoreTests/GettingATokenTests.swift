import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Getting a token", .offPool, .timeLimit(.minutes(1)))
struct GettingATokenTests {
    @Test("TOK-1: fetches at start, getToken is nil until then, refreshes tokenRefreshDelaySec after each success")
    func TOK1_fetchAtStartThenPeriodicRefresh() {
        let harness = Harness(latency: .seconds(2))
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0))
        harness.advance(to: 1.999)
        #expect(harness.provider.getToken() == nil)
        harness.advance(to: 2)
        #expect(harness.provider.getToken()?.value == "token-1")

        harness.advance(to: 1000)
        #expect(harness.service.callTimes == seconds(0, 302, 604, 906))
        #expect(harness.provider.getToken()?.value == "token-4")
        // Each refresh hands the token service the token it renews (existing_token).
        #expect(harness.service.calls.map(\.existingToken) == [nil, "token-1", "token-2", "token-3"])

        // getToken() reads the cache: no fetch, however often it is called.
        for _ in 0..<100 { _ = harness.provider.getToken() }
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callCount == 4)
    }

    @Test("TOK-2: without background refresh getToken blocks on a new fetch every time, nothing cached")
    func TOK2_onDemandFetchesANewTokenEachTime() throws {
        let harness = Harness(.test(backgroundRefreshEnabled: false), latency: .seconds(1))
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callCount == 0, "no fetch before anyone asks")

        let first = try #require(blocking(harness) { harness.provider.getToken() } ?? nil)
        let second = try #require(blocking(harness) { harness.provider.getToken() } ?? nil)
        #expect(first.value == "token-1")
        #expect(second.value == "token-2")
        #expect(first.fetchedAtMonotonic.sinceOrigin == .seconds(1))
        #expect(second.fetchedAtMonotonic.sinceOrigin == .seconds(2))
        #expect(harness.service.callTimes == seconds(0, 1))

        // What was handed out is remembered for RET-4, and reads stale once older than the delay:
        // no refresh falls due without background refresh.
        harness.advance(to: 302)
        #expect(harness.provider.cachedToken()?.stale == false)
        harness.advance(to: 302.001)
        #expect(harness.provider.cachedToken()?.stale == true)

        // The non-blocking form has the same meaning. The fetch it starts does not make the old
        // token fresh again while it is under way (with background refresh, a refresh's first
        // attempt would: TOK-7).
        let recorded = NIOLockedValueBox<[String?]>([])
        harness.provider.getToken { token in recorded.withLockedValue { $0.append(token?.value) } }
        harness.advance(to: 302.5)
        #expect(harness.service.callCount == 3, "the fetch is under way")
        #expect(harness.provider.cachedToken()?.stale == true)
        harness.advance(to: 303.001)
        #expect(recorded.withLockedValue { $0 } == ["token-3"])
    }

    @Test("TOK-3: onTokenReady answers at once when fresh, after a refresh when not, never on the caller's stack")
    func TOK3_onTokenReadyFreshOrRefresh() {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 100)
        let fresh = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(fresh.callback)
        #expect(fresh.count == 0, "the callback must not run synchronously")
        harness.scheduler.runUntilIdle()
        #expect(fresh.tokens == ["token-1"])
        #expect(fresh.all.map(\.at) == seconds(100))
        #expect(harness.service.callCount == 1)

        // Inactive past tokenRefreshDelaySec: refresh paused, the token is not fresh any more.
        harness.setLifecycle(.background)
        harness.advance(to: 500)
        let stale = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(stale.callback)
        harness.advance(to: 502)
        #expect(stale.tokens == ["token-2"])
        #expect(stale.all.map(\.at) == seconds(501))
        #expect(harness.service.callTimes == seconds(0, 500))
    }

    @Test("TOK-3: without background refresh onTokenReady fetches a new token asynchronously")
    func TOK3_onTokenReadyWithoutBackgroundRefreshFetchesAnew() {
        let harness = Harness(.test(backgroundRefreshEnabled: false))
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.scheduler.runUntilIdle()
        harness.provider.onTokenReady(recorder.callback)
        harness.scheduler.runUntilIdle()
        #expect(recorder.tokens == ["token-1", "token-2"])
        #expect(harness.service.callCount == 2)
    }

    @Test("TOK-3: the callback runs on a background thread, not the caller's")
    func TOK3_callbackOnBackgroundThread() async throws {
        let service = GatedTokenFetcher()
        service.open()
        let provider = WAFTokenProvider(configuration: .test(), fetcher: service)
        defer { provider.shutdown() }
        let (answered, sameThread) = await onOwnThread {
            let answered = DispatchSemaphore(value: 0)
            let ranOn = NIOLockedValueBox<pthread_t?>(nil)
            let caller = pthread_self()
            provider.onTokenReady { _, _ in
                ranOn.withLockedValue { $0 = pthread_self() }
                answered.signal()
            }
            let ok = answered.wait(timeout: .now() + 10) == .success
            return (ok, ranOn.value.map { pthread_equal($0, caller) != 0 })
        }
        #expect(answered)
        #expect(sameThread == false)
    }

    @Test("TOK-4: concurrent requests that need a fetch share the one in flight")
    func TOK4_concurrentRequestsShareOneFetch() {
        let harness = Harness(.test(backgroundRefreshEnabled: false), latency: .seconds(1))
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        let onDemand = NIOLockedValueBox<[String?]>([])
        for _ in 0..<25 {
            harness.provider.onTokenReady(recorder.callback)
            harness.provider.refreshToken(recorder.callback)
            harness.provider.getToken { token in onDemand.withLockedValue { $0.append(token?.value) } }
        }
        harness.advance(to: 1)
        #expect(harness.service.callTimes == seconds(0))
        #expect(harness.service.maxInFlight == 1)
        #expect(recorder.tokens == Array(repeating: "token-1", count: 50))
        #expect(onDemand.withLockedValue { $0 } == Array(repeating: "token-1", count: 25))
    }

    @Test("TOK-4: 64 threads calling getToken at once make one fetch")
    func TOK4_manyThreadsOneFetch() async {
        let service = GatedTokenFetcher()
        let provider = WAFTokenProvider(configuration: .test(backgroundRefreshEnabled: false), fetcher: service)
        defer { provider.shutdown() }
        let results = NIOLockedValueBox<[String?]>([])
        let (reachedGate, allJoined, allReturned) = await onOwnThread {
            let group = DispatchGroup()
            for _ in 0..<64 {
                group.enter()
                startThread {
                    let token = provider.getToken()
                    results.withLockedValue { $0.append(token?.value) }
                    group.leave()
                }
            }
            let reachedGate = service.waitForFetch()
            // Let the fetch finish only once every caller has joined it.
            let allJoined = eventually { provider.status().refresh.pendingRequests == 64 }
            service.open()
            return (reachedGate, allJoined, group.wait(timeout: .now() + 10) == .success)
        }
        #expect(reachedGate && allJoined && allReturned)
        #expect(service.calls == 1)
        #expect(service.maxInFlight == 1)
        #expect(results.value == Array(repeating: "gated-token-1", count: 64))
    }

    @Test("TOK-4: a storm of requests from many threads never has two fetches in flight")
    func TOK4_refreshStormNeverOverlaps() async {
        let service = GatedTokenFetcher()
        service.open()
        let provider = WAFTokenProvider(configuration: .test(), fetcher: service)
        defer { provider.shutdown() }
        let total = 8 * 250
        let answered = NIOLockedValueBox(0)
        let allAnswered = await onOwnThread {
            let done = DispatchSemaphore(value: 0)
            DispatchQueue.concurrentPerform(iterations: 8) { worker in
                for index in 0..<250 {
                    let callback: WAFTokenResultCallback = { _, _ in
                        if answered.withLockedValue({
                            $0 += 1; return $0
                        }) == total {
                            done.signal()
                        }
                    }
                    switch (worker + index) % 4 {
                    case 0: provider.refreshToken(callback)
                    case 1: provider.onTokenReady(callback)
                    case 2:
                        provider.setLifecycle(index % 8 == 2 ? .background : .foreground)
                        provider.refreshToken(callback)
                    default:
                        _ = provider.getToken()
                        provider.refreshToken(callback)
                    }
                }
            }
            return done.wait(timeout: .now() + 30) == .success
        }
        #expect(allAnswered)
        #expect(answered.value == total)
        #expect(service.maxInFlight == 1)
    }

    @Test("TOK-5: a failed refresh keeps the good token, served as stale once older than tokenRefreshDelaySec")
    func TOK5_failedRefreshKeepsGoodToken() throws {
        let harness = Harness(script: [.success], then: .fail(ScriptedTokenFetcher.outage))
        harness.scheduler.runUntilIdle()
        harness.advance(to: 299.999)
        #expect(harness.provider.cachedToken()?.stale == false)
        harness.advance(to: 300.001)
        #expect(harness.service.callTimes == seconds(0, 300))
        let cached = try #require(harness.provider.cachedToken())
        #expect(cached.token.value == "token-1")
        #expect(cached.stale)
        let status = harness.provider.status()
        #expect(status.token?.stale == true)
        #expect(status.refresh.state == .retrying)
        #expect(status.refresh.lastError?.name == "errorInvokingGetChallengeEndpoint")

        harness.advance(to: 3600)
        #expect(harness.provider.getToken()?.value == "token-1")
        #expect(harness.service.callCount > 100)
    }

    @Test("TOK-6: every callback is called exactly once, whatever the outcome")
    func TOK6_everyCallbackExactlyOnce() {
        let harness = Harness(.test(maxRetryCount: 2), script: [.success] + failures(10), latency: .seconds(1))
        let recorders = (0..<4).map { _ in CallbackRecorder(scheduler: harness.scheduler) }
        harness.provider.onTokenReady(recorders[0].callback)  // answered by the first fetch
        harness.advance(to: 10)
        harness.provider.onTokenReady(recorders[1].callback)  // fresh: answered at once
        harness.provider.refreshToken(recorders[2].callback)  // forced: answered by RET-3
        harness.advance(to: 400)
        harness.provider.refreshToken(recorders[3].callback)  // pending at shutdown
        harness.provider.shutdown()
        harness.advance(to: 1000)
        #expect(recorders.map(\.count) == [1, 1, 1, 1])
        #expect(recorders.map { $0.tokens[0] } == ["token-1", "token-1", nil, nil])
        #expect(recorders.map { $0.errorNames[0] } == [nil, nil, "allRetriesFailed", "unexpected"])
    }

    @Test("TOK-6: a callback that throws is reported and the provider goes on")
    func TOK6_throwingCallbackDoesNotStopProvider() {
        struct CustomerBug: Error {}
        let harness = Harness(latency: .seconds(1))
        harness.provider.onTokenReady { _, _ in throw CustomerBug() }
        harness.advance(to: 1)
        let seen = harness.events.all
        guard seen.count == 2, case .tokenUpdated = seen[0], case .callbackFailed(let message) = seen[1] else {
            Issue.record("expected tokenUpdated then callbackFailed, got \(seen)")
            return
        }
        #expect(message == "CustomerBug()")
        #expect(harness.provider.status().counters.callbackFailures == 1)

        let after = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(after.callback)
        harness.advance(to: 302)
        #expect(after.tokens == ["token-1"])
        #expect(harness.service.callTimes == seconds(0, 301))
        #expect(harness.provider.getToken()?.value == "token-2")
    }

    @Test("TOK-6: a slow callback does not stall the provider or other callbacks")
    func TOK6_slowCallbackDoesNotStall() async {
        let service = GatedTokenFetcher()
        service.open()
        let provider = WAFTokenProvider(configuration: .test(), fetcher: service)
        defer { provider.shutdown() }
        let (slowStarted, othersServed, successes) = await onOwnThread {
            let release = DispatchSemaphore(value: 0)
            let slowEntered = DispatchSemaphore(value: 0)
            provider.onTokenReady { _, _ in
                slowEntered.signal()
                _ = release.wait(timeout: .now() + 30)
            }
            let slowStarted = slowEntered.wait(timeout: .now() + 10) == .success
            // While that callback still blocks, the provider answers others and serves its state.
            let fast = DispatchSemaphore(value: 0)
            provider.onTokenReady { token, _ in if token != nil { fast.signal() } }
            let first = fast.wait(timeout: .now() + 10) == .success
            provider.refreshToken { token, _ in if token != nil { fast.signal() } }
            let second = fast.wait(timeout: .now() + 10) == .success
            let successes = provider.status().counters.fetchSuccesses
            release.signal()
            return (slowStarted, first && second, successes)
        }
        #expect(slowStarted)
        #expect(othersServed)
        #expect(successes == 2)
    }
}

/// TENANT-12 in the core: a caller with a deadline of its own withdraws its wait when the deadline
/// passes, and the provider forgets it at once instead of holding every such callback until RET-3
/// while fetches fail.
@Suite("Withdrawn waits", .offPool, .timeLimit(.minutes(1)))
struct WithdrawnWaitTests {
    @Test("TENANT12: a withdrawn onTokenReady or refreshToken is forgotten and never called; the others are answered as before")
    func TENANT12_withdrawnWaitsAreForgotten() {
        let harness = Harness(script: [.success], then: .fail(ScriptedTokenFetcher.outage))
        harness.scheduler.runUntilIdle()
        let called = NIOLockedValueBox<[String]>([])
        // A forced refresh that keeps failing holds its waiters for the whole retry sequence.
        var withdrawn: [WAFTokenWait] = []
        for index in 0..<100 {
            withdrawn.append(harness.provider.refreshToken { _, _ in called.withLockedValue { $0.append("withdrawn \(index)") } })
        }
        harness.provider.refreshToken { token, error in called.withLockedValue { $0.append(token == nil ? "kept: \(error!.name)" : "kept") } }
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.status().refresh.pendingRequests == 101)
        for wait in withdrawn { wait.cancel() }
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.status().refresh.pendingRequests == 1, "the withdrawn are forgotten at once")
        harness.advance(to: 3600)
        #expect(called.withLockedValue { $0 } == ["kept: allRetriesFailed"], "only the one still waiting is answered")
        // Withdrawing a wait that was answered changes nothing.
        withdrawn[0].cancel()
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.status().refresh.pendingRequests == 0)
    }
}
