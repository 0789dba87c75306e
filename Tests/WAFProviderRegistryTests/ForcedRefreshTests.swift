import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFProviderRegistry

/// TENANT-4: forced refreshes of one provider start at most one fetch per interval. The interval
/// runs on the real boot-time clock, not the provider's virtual one, so these tests cannot move
/// it: 300 s stands for "still inside the interval", zero for "no limit".
@Suite("Forced refreshes and their interval", .offPool, .timeLimit(.minutes(1)))
struct ForcedRefreshTests {
    struct Answer: Sendable {
        let label: String
        let token: String?
        let error: SdkError?
    }

    /// What the callbacks of forced refreshes got, in the order they were called.
    final class Answers: Sendable {
        private let box = NIOLockedValueBox<[Answer]>([])

        func callback(_ label: String) -> WAFTokenResultCallback {
            { [box] token, error in box.withLockedValue { $0.append(Answer(label: label, token: token?.value, error: error)) } }
        }

        var all: [Answer] { box.withLockedValue { $0 } }
    }

    @Test("TENANT4: the first forced refresh fetches; one that comes while it runs joins it, and both callbacks get its token")
    func TENANT4_secondRequestJoinsTheFetchInFlight() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let decisions = NIOLockedValueBox<[String]>([])
        let forced = ForcedRefresh(interval: .seconds(300)) { decision in decisions.withLockedValue { $0.append(decision.name) } }
        let answers = Answers()
        let (first, firstWait) = forced.request(provider, answers.callback("first"))
        let (second, secondWait) = forced.request(provider, answers.callback("second"))
        #expect(first.name == "fetched" && second.name == "joined")
        #expect(firstWait != nil && secondWait != nil, "both are waits their callers may withdraw")
        let answered = registry.settle { answers.all.count == 2 }
        #expect(answered)
        #expect(answers.all.map(\.label) == ["first", "second"])
        #expect(answers.all.map(\.token) == ["token-2", "token-2"])
        #expect(registry.fetcher.callCount == 2, "the provider's first token, then one forced fetch for both")
        #expect(decisions.withLockedValue { $0 } == ["fetched", "joined"], "every decision is told, for the metric")
    }

    @Test("TENANT4: inside the interval after a forced fetch that gave a token, a request starts nothing and its callback is never called")
    func TENANT4_limitedAfterASuccess() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let forced = ForcedRefresh(interval: .seconds(300))
        let answers = Answers()
        forced.request(provider, answers.callback("forced"))
        let answered = registry.settle { !answers.all.isEmpty }
        #expect(answered)
        let calls = registry.fetcher.callCount
        let (later, wait) = forced.request(provider, answers.callback("later"))
        guard case .limited(failure: let failure, retryAfter: let retryAfter) = later else {
            Issue.record("inside the interval a request is limited, not \(later.name)")
            return
        }
        #expect(later.isLimited)
        #expect(failure == nil, "the fetch that opened the interval gave a token")
        #expect(retryAfter > .seconds(240) && retryAfter <= .seconds(300), "what is left of the interval: \(retryAfter)")
        #expect(wait == nil, "nothing to withdraw")
        registry.scheduler.runUntilIdle()
        #expect(registry.fetcher.callCount == calls, "no fetch")
        #expect(answers.all.map(\.label) == ["forced"], "the limited request's callback is not called; its caller answers on its own")
    }

    @Test("TENANT4: inside the interval after a forced fetch that failed, a request is limited with that same failure, never a token")
    func TENANT4_limitedWithTheFailureThatOpenedTheInterval() throws {
        let registry = Registry(script: [.success], then: .fail(ScriptedTokenFetcher.outage))
        let provider = try registry.provider()
        #expect(provider.cachedToken()?.token.value == "token-1")
        let forced = ForcedRefresh(interval: .seconds(300))
        let answers = Answers()
        #expect(forced.request(provider, answers.callback("forced")).0.name == "fetched")
        // The provider answers a failing fetch only after its retries (RET-1, RET-3), in virtual time.
        let answered = registry.settle(step: .seconds(10)) { !answers.all.isEmpty }
        try #require(answered)
        let answer = try #require(answers.all.first)
        let error = try #require(answer.error)
        #expect(answer.token == nil)
        #expect(error.underlying.name == ScriptedTokenFetcher.outage.name)
        let calls = registry.fetcher.callCount
        let (later, wait) = forced.request(provider, answers.callback("later"))
        guard case .limited(failure: let failure, retryAfter: let retryAfter) = later else {
            Issue.record("inside the interval a request is limited, not \(later.name)")
            return
        }
        #expect(failure?.name == error.name, "the failure the forced fetch's own callers got")
        #expect(failure?.underlying.name == ScriptedTokenFetcher.outage.name)
        #expect(retryAfter > .seconds(240) && retryAfter <= .seconds(300), "for the rest of the interval: \(retryAfter)")
        #expect(wait == nil && registry.fetcher.callCount == calls, "nothing started")
    }

    @Test("TENANT4: with an interval of zero every forced refresh fetches, one after another")
    func TENANT4_zeroIntervalNeverLimits() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let forced = ForcedRefresh()
        #expect(forced.interval == .zero, "off unless configured")
        for expected in ["token-2", "token-3", "token-4"] {
            let answers = Answers()
            #expect(forced.request(provider, answers.callback("forced")).0.name == "fetched")
            let answered = registry.settle { !answers.all.isEmpty }
            #expect(answered)
            #expect(answers.all.first?.token == expected)
        }
        #expect(registry.fetcher.callCount == 4)
    }

    @Test("TENANT4: an interval lowered to zero lifts the limit at once")
    func TENANT4_intervalLoweredToZero() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let forced = ForcedRefresh(interval: .seconds(300))
        forced.request(provider, Answers().callback("forced"))
        registry.scheduler.runUntilIdle()
        #expect(forced.request(provider, Answers().callback("limited")).0.isLimited)
        forced.interval = .zero
        #expect(forced.request(provider, Answers().callback("after")).0.name == "fetched")
    }

    @Test("TENANT4: reset forgets the fetch that opened the interval, as after a reload that switched the identity: the next request fetches")
    func TENANT4_resetForgetsTheLastFetch() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let forced = ForcedRefresh(interval: .seconds(300))
        forced.request(provider, Answers().callback("forced"))
        registry.scheduler.runUntilIdle()
        #expect(forced.request(provider, Answers().callback("limited")).0.isLimited)
        forced.reset()
        let answers = Answers()
        #expect(forced.request(provider, answers.callback("after reset")).0.name == "fetched")
        let answered = registry.settle { !answers.all.isEmpty }
        #expect(answered)
        #expect(answers.all.first?.token == "token-3")
    }

    @Test("A caller that withdrew its wait before the fetch ended is not called; the others are")
    func withdrawnWaitIsNotCalled() throws {
        let registry = Registry()
        let provider = try registry.provider()
        let forced = ForcedRefresh(interval: .seconds(300))
        let answers = Answers()
        let (_, firstWait) = forced.request(provider, answers.callback("first"))
        forced.request(provider, answers.callback("second"))
        // As a caller whose deadline passed does: it has answered on its own already.
        firstWait?.cancel()
        let answered = registry.settle { !answers.all.isEmpty }
        #expect(answered)
        registry.scheduler.runUntilIdle()
        #expect(answers.all.map(\.label) == ["second"])
        #expect(answers.all.first?.token == "token-2")
    }
}
