import Dispatch
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFProviderRegistry

/// The small parts that wait for several answers, or let only the first of several callers act.
@Suite("Countdowns, once, and gathered statuses", .offPool)
struct CountdownAndOnceTests {
    @Test("A countdown calls done once, with the value that arrived last, when the count is reached, and never again")
    func countdownCallsDoneOnceWithTheLastValue() {
        let done = NIOLockedValueBox<[Int]>([])
        let countdown = Countdown<Int>(3) { value in done.withLockedValue { $0.append(value) } }
        countdown.arrived(1)
        countdown.arrived(2)
        let early = done.withLockedValue { $0 }
        #expect(early.isEmpty, "two of three")
        countdown.arrived(3)
        countdown.arrived(4)
        let calls = done.withLockedValue { $0 }
        #expect(calls == [3])
    }

    @Test("Arrivals from many threads at once still call done exactly once")
    func countdownConcurrentArrivals() {
        let calls = NIOLockedValueBox(0)
        let countdown = Countdown<Void>(64) { _ in calls.withLockedValue { $0 += 1 } }
        DispatchQueue.concurrentPerform(iterations: 64) { _ in countdown.arrived(()) }
        let count = calls.withLockedValue { $0 }
        #expect(count == 1)
    }

    @Test("Once is claimed by its first caller only, and says so from then on")
    func onceClaimedByTheFirstCaller() {
        let once = Once()
        #expect(!once.isClaimed)
        let first = once.claim()
        let second = once.claim()
        #expect(first && !second)
        #expect(once.isClaimed)
    }

    @Test("Of many threads claiming at once, exactly one wins")
    func onceHasOneWinnerUnderContention() {
        let once = Once()
        let winners = NIOLockedValueBox(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            if once.claim() { winners.withLockedValue { $0 += 1 } }
        }
        let count = winners.withLockedValue { $0 }
        #expect(count == 1)
    }

    @Test("Statuses asked of several providers are handed over once, by name, when the last one has answered")
    func statusesHandedOverOnceAllAnswered() throws {
        let registry = Registry()
        try registry.add("default", domain: "example.com")
        try registry.add("shop", domain: "shop.example.com")
        let handed = NIOLockedValueBox<[[String]]>([])
        ProviderStatuses.gather(registry.providers.all) { statuses in handed.withLockedValue { $0.append(statuses.keys.sorted()) } }
        let before = handed.withLockedValue { $0 }
        #expect(before.isEmpty, "the providers answer on their own context, which has not run yet")
        registry.scheduler.runUntilIdle()
        let after = handed.withLockedValue { $0 }
        #expect(after == [["default", "shop"]])
    }
}
