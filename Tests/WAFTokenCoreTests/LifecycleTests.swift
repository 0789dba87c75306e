import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("App lifecycle", .offPool, .timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test("LIFE-1: three states; ios is active in the foreground only, android unless closed; default ios, foreground")
    func LIFE1_statesAndProfiles() {
        #expect(WAFLifecycleProfile.ios.isActive(.foreground))
        #expect(!WAFLifecycleProfile.ios.isActive(.background))
        #expect(!WAFLifecycleProfile.ios.isActive(.closed))
        #expect(WAFLifecycleProfile.android.isActive(.foreground))
        #expect(WAFLifecycleProfile.android.isActive(.background))
        #expect(!WAFLifecycleProfile.android.isActive(.closed))
        #expect(WAFTokenProviderOptions().lifecycleProfile == .ios)

        let harness = Harness()
        #expect(harness.provider.status().lifecycle == .init(state: .foreground, profile: .ios, active: true, paused: false))
        harness.setLifecycle(.background)
        #expect(harness.provider.status().lifecycle == .init(state: .background, profile: .ios, active: false, paused: false))

        let android = Harness(profile: .android)
        android.setLifecycle(.background)
        #expect(android.provider.status().lifecycle.active)
        android.setLifecycle(.closed)
        #expect(!android.provider.status().lifecycle.active)
    }

    @Test("LIFE-2: no token-service request of its own while inactive; the schedule is held")
    func LIFE2_noRequestsWhileInactive() throws {
        let harness = Harness()
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 1000)
        #expect(harness.service.callTimes == seconds(0))
        let refresh = harness.provider.status().refresh
        #expect(refresh.held)
        #expect(refresh.nextAt == harness.scheduler.wallClockOrigin.addingTimeInterval(300))

        // The same app on android keeps refreshing in the background.
        let android = Harness(profile: .android)
        android.advance(to: 100)
        android.setLifecycle(.background)
        android.advance(to: 1000)
        #expect(android.service.callTimes == seconds(0, 300, 600, 900))
    }

    @Test("LIFE-2: retries stop while inactive, and a fetch in flight is abandoned without counting as a failure")
    func LIFE2_retriesAndFetchInFlightHeld() {
        let retrying = Harness(then: .fail(ScriptedTokenFetcher.outage))
        retrying.advance(to: 0.5)
        retrying.setLifecycle(.closed)
        retrying.advance(to: 100)
        #expect(retrying.service.callTimes == seconds(0, 0.1, 0.3))

        let slow = Harness(latency: .seconds(10))
        slow.advance(to: 5)
        slow.setLifecycle(.background)
        slow.advance(to: 50)
        #expect(slow.provider.getToken() == nil)
        let status = slow.provider.status()
        #expect(status.refresh.consecutiveFailures == 0)
        #expect(status.refresh.held)
        #expect(!status.refresh.inFlight)
        slow.setLifecycle(.foreground)
        slow.advance(to: 60)
        #expect(slow.service.callTimes == seconds(0, 50))
        #expect(slow.provider.getToken()?.value == "token-1")
    }

    @Test("LIFE-3: inactive for longer than tokenRefreshDelaySec pauses background refresh and the token reads stale")
    func LIFE3_pausedAfterLongInactivity() {
        let harness = Harness()
        harness.advance(to: 290)
        harness.setLifecycle(.background)
        harness.advance(to: 590)
        #expect(!harness.provider.status().lifecycle.paused, "exactly tokenRefreshDelaySec is not longer than it")
        harness.advance(to: 590.001)
        let status = harness.provider.status()
        #expect(status.lifecycle.paused)
        #expect(status.refresh.state == .paused)
        #expect(status.token?.stale == true)
        #expect(harness.provider.cachedToken()?.stale == true)

        #expect(harness.events.lifecycles.map(\.paused) == [false, true])
    }

    @Test("LIFE-4: back from a pause, the provider refreshes at once")
    func LIFE4_refreshAtOnceAfterPause() {
        let harness = Harness()
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 450)
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0, 450))
        #expect(!harness.provider.status().lifecycle.paused)
        harness.advance(to: 750)
        #expect(harness.service.callTimes == seconds(0, 450, 750))
    }

    @Test("LIFE-4: back with a refresh that fell due while inactive, the provider refreshes at once")
    func LIFE4_refreshAtOnceWhenDue() {
        let harness = Harness()
        harness.advance(to: 200)
        harness.setLifecycle(.background)
        harness.advance(to: 350)
        #expect(!harness.provider.status().lifecycle.paused)
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0, 350))
    }

    @Test("LIFE-4: back before the next refresh is due, the held schedule simply continues")
    func LIFE4_heldScheduleContinues() {
        let harness = Harness()
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 200)
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0))
        harness.advance(to: 300)
        #expect(harness.service.callTimes == seconds(0, 300))
    }

    @Test("LIFE-5: onTokenReady is served in any state; getToken right after return may give the old token")
    func LIFE5_onTokenReadyInAnyState() {
        let harness = Harness(latency: .seconds(1))
        harness.advance(to: 100)
        harness.setLifecycle(.background)
        harness.advance(to: 500)
        let inBackground = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(inBackground.callback)
        harness.advance(to: 501)
        #expect(inBackground.tokens == ["token-2"])
        #expect(harness.service.callTimes == seconds(0, 500))
        #expect(harness.provider.status().lifecycle.paused == false, "a token fetched while inactive is fresh until it ages")

        harness.setLifecycle(.closed)
        harness.advance(to: 1000)
        #expect(harness.provider.status().lifecycle.paused)
        harness.setLifecycle(.foreground)
        #expect(harness.provider.getToken()?.value == "token-2", "the old token, right after return")
        let onReturn = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(onReturn.callback)
        harness.advance(to: 1001)
        #expect(onReturn.tokens == ["token-3"])
        #expect(harness.service.callTimes == seconds(0, 500, 1000))
    }
}

@Suite("App lifecycle: returns with retries pending", .offPool, .timeLimit(.minutes(1)))
struct LifecycleReturnTests {
    @Test("LIFE-4: back from a pause with a retry pending for an explicit request, the refresh starts at once")
    func LIFE4_pauseReturnWithRetryPending() {
        let harness = Harness(script: [.success, .fail(ScriptedTokenFetcher.outage)])
        harness.advance(to: 10)
        harness.setLifecycle(.background)
        harness.advance(to: 400)
        #expect(harness.provider.status().lifecycle.paused)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 400))
        harness.advance(to: 400.05)
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0, 400, 400.05), "at once, not at the pending 400.1")
        harness.scheduler.runUntilIdle()
        #expect(recorder.tokens == ["token-2"])
        harness.advance(to: 700.1)
        #expect(harness.service.callTimes == seconds(0, 400, 400.05, 700.05))
    }

    @Test("LIFE-4: back before a pause with a retry pending, the pending wait simply runs")
    func LIFE4_returnWithRetryPendingKeepsTheWait() {
        let harness = Harness(script: [.success, .fail(ScriptedTokenFetcher.outage)])
        harness.advance(to: 10)
        harness.setLifecycle(.background)
        harness.advance(to: 100)
        let recorder = CallbackRecorder(scheduler: harness.scheduler)
        harness.provider.onTokenReady(recorder.callback)
        harness.provider.refreshToken(recorder.callback)
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 100))
        harness.advance(to: 100.05)
        harness.setLifecycle(.foreground)
        #expect(harness.service.callTimes == seconds(0, 100))
        harness.advance(to: 100.1)
        #expect(harness.service.callTimes == seconds(0, 100, 100.1))
        #expect(recorder.tokens == ["token-1", "token-2"])
    }
}
