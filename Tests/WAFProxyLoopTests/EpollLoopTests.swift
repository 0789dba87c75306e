import CEpoll
import Foundation
import NIOCore
import Synchronization
import Testing
import WAFTestTraits

@testable import WAFProxyLoop

/// Runs `loop` on a thread of its own until the body returns, then stops it and waits for it.
func withRunningLoop<Result>(_ body: (EpollLoop) throws -> Result) throws -> Result {
    let loop = try EpollLoop()
    let done = DispatchSemaphore(value: 0)
    startThread {
        loop.run()
        done.signal()
    }
    defer {
        loop.stop()
        #expect(done.wait(timeout: .now() + 10) == .success, "the loop stops within 10 s")
    }
    return try body(loop)
}

/// `work` on the loop, its result back to the caller (within 10 s, or the test fails).
func onLoop<T: Sendable>(_ loop: EpollLoop, _ work: @escaping @Sendable () throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    loop.execute {
        result.withLock { $0 = Result { try work() } }
        done.signal()
    }
    guard done.wait(timeout: .now() + 10) == .success, let outcome = result.withLock({ $0 }) else {
        throw LoopError.system("the loop did not answer within 10 s", ETIMEDOUT)
    }
    return try outcome.get()
}

@Suite("The proxy's event loop", .offPool)
struct EpollLoopTests {
    @Test("Timers fire in the order of their deadlines, whatever the order they were set in; a cancelled one never")
    func timersInOrder() throws {
        let fired = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        try withRunningLoop { loop in
            try onLoop(loop) {
                // One base for all: the order cannot depend on when each was set.
                let base = EpollLoop.now
                for (index, milliseconds) in [40, 10, 30, 20, 50].enumerated() {
                    let timer = loop.schedule(at: base + UInt64(milliseconds) * 1_000_000) {
                        fired.withLock { $0.append(milliseconds) }
                        if milliseconds == 50 { done.signal() }
                    }
                    if index == 2 { loop.cancel(timer) }
                }
            }
            #expect(done.wait(timeout: .now() + 10) == .success, "the last timer fired within 10 s")
        }
        #expect(fired.withLock { $0 } == [10, 20, 40, 50])
    }

    @Test("Timers cancelled long before their deadlines do not pile up: the heap keeps the live ones once the cancelled outnumber them")
    func cancelledTimersDoNotPileUp() throws {
        let loop = try EpollLoop()
        let live = loop.schedule(in: 3_600_000_000_000) {}
        for _ in 0..<10_000 { loop.cancel(loop.schedule(in: 3_600_000_000_000) {}) }
        #expect(loop.timersPending <= 1100, "\(loop.timersPending) timers in the heap for one live one")
        loop.cancel(live)
    }

    @Test("Work handed in from other threads runs on the loop's thread, in order")
    func executeFromOtherThreads() throws {
        let seen = Mutex<[Int]>([])
        let offLoop = Mutex(0)
        try withRunningLoop { loop in
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for index in 0..<100 {
                    loop.execute {
                        if !loop.inLoop { offLoop.withLock { $0 += 1 } }
                        seen.withLock { $0.append(thread * 1000 + index) }
                    }
                }
            }
            _ = try onLoop(loop) { true }
        }
        let values = seen.withLock { $0 }
        #expect(values.count == 400)
        #expect(offLoop.withLock { $0 } == 0, "all of it on the loop's thread")
        for thread in 0..<4 {
            let mine = values.filter { $0 / 1000 == thread }
            #expect(mine == mine.sorted(), "thread \(thread)'s work in the order it was handed in")
        }
    }

    /// Counts what the loop tells it; on its first readiness, runs `first` once.
    final class Counting: LoopHandler, @unchecked Sendable {
        var events = 0
        var first: (() -> Void)?

        func ready(_ events: UInt32) {
            self.events += 1
            let work = first
            first = nil
            work?()
        }
    }

    @Test("An event for a descriptor closed and reused within one batch does not reach the new handler (a stale event)")
    func staleEventsDropped() throws {
        try withRunningLoop { loop in
            let newcomer = Counting()
            let reused = Mutex(false)
            try onLoop(loop) {
                var first: [Int32] = [0, 0]
                var second: [Int32] = [0, 0]
                socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &first)
                socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &second)
                // Both readable: one batch reports both. Whichever comes first closes the other's
                // descriptor and registers a new, quiet socket, which gets the same number.
                let a = Counting()
                let b = Counting()
                func takeOver(_ victim: Int32) {
                    loop.forget(victim)
                    var fresh: [Int32] = [0, 0]
                    socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &fresh)
                    // dup2 closes the victim and puts the new socket on its number at once, whatever
                    // other tests open and close meanwhile.
                    reused.withLock { $0 = dup2(fresh[0], victim) == victim }
                    close(fresh[0])
                    try? loop.register(victim, events: EPOLLIN.rawValue, newcomer)
                }
                a.first = { if b.events == 0 { takeOver(second[0]) } }
                b.first = { if a.events == 0 { takeOver(first[0]) } }
                try loop.register(first[0], events: EPOLLIN.rawValue, a)
                try loop.register(second[0], events: EPOLLIN.rawValue, b)
                _ = write(first[1], "x", 1)
                _ = write(second[1], "x", 1)
            }
            usleep(100_000)
            #expect(reused.withLock { $0 }, "the new socket got the closed one's number")
            #expect(try onLoop(loop) { newcomer.events } == 0, "nothing was ready on it")
        }
    }

    @Test("A timeout whose end falls inside the turn that fires its timer expires in that turn, and the turn ends")
    func timeoutEndingInsideATurn() throws {
        let expired = Mutex(false)
        let done = DispatchSemaphore(value: 0)
        startThread {
            guard let loop = try? EpollLoop() else { return }
            loop.runPending()
            let timeout = LoopTimeout(on: loop) { expired.withLock { $0 = true } }
            // Its timer fires 1 ms from now.
            timeout.move(in: 1_000_000)
            let moved = OnLoop(value: timeout)
            // Handed in before the timer fires, so that one turn runs it, then fires the timer:
            // the end moves to 1 ms into that turn (later: no new timer), and the work outlasts it.
            loop.execute {
                moved.value.move(in: 1_000_000)
                let start = EpollLoop.now
                while EpollLoop.now < start + 3_000_000 {}
            }
            usleep(3000)
            loop.runPending()
            withExtendedLifetime(timeout) {}
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 5) == .success, "the turn ended within 5 s: the loop spun on the timeout")
        #expect(expired.withLock { $0 }, "the timeout expired in that turn")
    }

    @Test("The timer heap gives deadlines back in order under random inserts and removals")
    func timerHeap() {
        var heap = TimerHeap()
        var generator = SystemRandomNumberGenerator()
        var expected: [UInt64] = []
        for id in 0..<500 {
            let deadline = UInt64.random(in: 0..<1000, using: &generator)
            heap.insert(deadline: deadline, id: UInt64(id))
            expected.append(deadline)
            if id % 7 == 0 {
                expected.sort()
                #expect(heap.first?.deadline == expected.removeFirst())
                heap.removeFirst()
            }
        }
        expected.sort()
        var out: [UInt64] = []
        while let first = heap.first {
            out.append(first.deadline)
            heap.removeFirst()
        }
        #expect(out == expected)
    }
}
