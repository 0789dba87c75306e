import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Provider lifetime and the production scheduler", .offPool, .timeLimit(.minutes(1)))
struct LifetimeTests {
    @Test("a provider its owner drops stops: no timer left, the fetch in flight cancelled, nothing fetched after")
    func droppedProviderStops() {
        let scheduler = VirtualScheduler()
        let service = ScriptedTokenFetcher(scheduler: scheduler, latency: .seconds(5))
        weak var dropped: WAFTokenProvider?
        do {
            let provider = WAFTokenProvider(
                configuration: .test(), fetcher: service, scheduler: scheduler, options: .init(jitter: false, logger: .quiet))
            dropped = provider
            scheduler.advance(to: MonotonicInstant(sinceOrigin: .seconds(306)))
            #expect(provider.getToken()?.value == "token-1")
            #expect(provider.status().refresh.inFlight, "the refresh at 305 s is under way")
        }
        #expect(dropped == nil, "nothing the provider armed keeps it alive")
        scheduler.runUntilIdle()
        #expect(scheduler.nextJobTime == nil, "no timer and no fetch left")
        scheduler.advance(to: MonotonicInstant(sinceOrigin: .seconds(7200)))
        #expect(service.callTimes == seconds(0, 305))
    }

    @Test("the Dispatch scheduler fires timers in deadline order, never a cancelled one, and not before their time")
    func dispatchSchedulerTimers() async {
        let scheduler = DispatchScheduler(label: "test")
        let fired = NIOLockedValueBox<[(String, Duration)]>([])
        let started = scheduler.now
        let (done, signal) = AsyncStream.makeStream(of: Void.self)
        @Sendable func record(_ name: String) { fired.withLockedValue { $0.append((name, scheduler.now - started)) } }
        let cancelled = scheduler.schedule(after: .milliseconds(20)) { record("cancelled") }
        _ = scheduler.schedule(after: .milliseconds(150)) {
            record("second")
            signal.yield()
        }
        _ = scheduler.schedule(after: .milliseconds(50)) { record("first") }
        cancelled.cancel()
        let finished = await within(.seconds(10)) { for await _ in done { break } }
        #expect(finished, "the timers fired within 10 s")
        let seen = fired.value
        #expect(seen.map(\.0) == ["first", "second"])
        #expect(seen.count == 2 && seen[0].1 >= .milliseconds(50) && seen[1].1 >= .milliseconds(150), "never early: \(seen)")
        // A generous bound for a loaded machine; a scheduler off by a factor of 10 misses it.
        #expect(seen.count == 2 && seen[1].1 < .milliseconds(1400), "on time: \(seen)")
        #expect(scheduler.executeAndWait { 42 } == 42)
    }

    @Test("TOK-9: timers that fell due together (the state queue was held) fire in deadline order")
    func dispatchSchedulerTimersDueTogether() async {
        let scheduler = DispatchScheduler(label: "together")
        let fired = NIOLockedValueBox<[Int]>([])
        let (done, signal) = AsyncStream.makeStream(of: Void.self)
        // Held past every deadline, as a stopped process or a machine asleep would be: the queue
        // is let go only once all three are scheduled and due.
        let gate = DispatchSemaphore(value: 0)
        scheduler.execute { gate.wait() }
        // Each deadline lies between the clock read before its call and the clock read after it
        // plus its delay: on a loaded machine this thread may pause anywhere in between, so the
        // order to expect is the deadlines', known only within those bounds.
        var bounds: [(earliest: MonotonicInstant, latest: MonotonicInstant)] = []
        for (index, milliseconds) in [30, 10, 20].enumerated() {
            let before = scheduler.now
            _ = scheduler.schedule(after: .milliseconds(milliseconds)) {
                let count = fired.withLockedValue {
                    $0.append(index); return $0.count
                }
                if count == 3 { signal.yield() }
            }
            bounds.append((before + .milliseconds(milliseconds), scheduler.now + .milliseconds(milliseconds)))
        }
        await onOwnThread {
            usleep(100_000)
            gate.signal()
        }
        let finished = await within(.seconds(10)) { for await _ in done { break } }
        #expect(finished, "the timers fired within 10 s")
        let order = fired.value
        #expect(order.count == 3)
        // No timer fired before one whose deadline was surely earlier than its own.
        for (position, index) in order.enumerated() {
            for later in order[(position + 1)...] {
                #expect(!(bounds[later].latest < bounds[index].earliest), "timer \(later) was due before timer \(index): \(order), \(bounds)")
            }
        }
    }

    @Test("the Dispatch scheduler's clock follows real time, and its wall clock the system's")
    func dispatchSchedulerClock() async throws {
        let scheduler = DispatchScheduler(label: "clock")
        let start = scheduler.now
        try await Task.sleep(for: .milliseconds(200))
        let elapsed = scheduler.now - start
        #expect(elapsed >= .milliseconds(200) && elapsed < .seconds(5), "\(elapsed)")
        #expect(abs(scheduler.wallClockNow.timeIntervalSinceNow) < 1)
    }
}
