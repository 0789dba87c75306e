import NIOCore
import NIOPosix
import Testing
import WAFEventLoopExecutor
import WAFTestTraits

@Suite("The default executor on NIO's loops", .offPool, .timeLimit(.minutes(1)))
struct EventLoopTaskExecutorTests {
    @Test("A task runs on one of the group's loops")
    func runsOnTheLoops() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let onLoop = await withTaskExecutorPreference(EventLoopExecutors.taskExecutor(on: group)) {
            group.next().inEventLoop
        }
        try await group.shutdownGracefully()
        #expect(onLoop)
    }

    /// Whether sleeps stay off libdispatch's pool is the at-rest test's to see (AtRestTests):
    /// here, that they last as long as asked and come back to the loop.
    @Test("Task.sleep lasts as long as asked and resumes on the loop")
    func sleepResumesOnTheLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let (slept, onLoop) = try await withTaskExecutorPreference(EventLoopExecutors.taskExecutor(on: group)) {
            let started = ContinuousClock.now
            try await Task.sleep(for: .milliseconds(300))
            return (ContinuousClock.now - started, loop.inEventLoop)
        }
        try await group.shutdownGracefully()
        #expect(slept >= .milliseconds(300) && slept < .seconds(5), "slept \(slept)")
        #expect(onLoop, "resumed off the loop")
    }

    @Test("A sleep until a deadline on the suspending clock ends at it")
    func sleepUntilDeadline() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clock = SuspendingClock()
        let deadline = clock.now.advanced(by: .milliseconds(200))
        try await withTaskExecutorPreference(EventLoopExecutors.taskExecutor(on: group)) {
            try await Task.sleep(until: deadline, clock: clock)
        }
        try await group.shutdownGracefully()
        #expect(clock.now >= deadline)
    }
}
