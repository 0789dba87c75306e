import NIOCore
import NIOPosix
// The executor API this uses (TaskExecutor with scheduling, ExecutorFactory) is the standard
// library's, still marked experimental in Swift 6.3: a toolchain that drops it fails this build
// rather than the daemon at run time.
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency

#if canImport(Glibc)
import Glibc
#endif

/// Swift concurrency's default executor on NIO event loops: jobs run on the group's loops, and
/// delayed jobs (`Task.sleep`, timeouts) wait in the loops' own timers.
///
/// Why: on Linux the default executor is libdispatch's shared pool, and once a job has run there
/// libdispatch's pool monitor wakes the process once a second for the rest of its life; a daemon
/// whose next duty is a refresh minutes away should sleep until then (docs/performance.md, "At rest"). Tasks
/// that start from I/O also stay on the loop that did the I/O instead of hopping to a pool thread.
final class EventLoopTaskExecutor: TaskExecutor, SchedulingExecutor {
    private let group: MultiThreadedEventLoopGroup

    init(group: MultiThreadedEventLoopGroup) {
        self.group = group
    }

    func enqueue(_ job: consuming ExecutorJob) {
        // `any()` prefers the calling thread's loop when it is one of the group's.
        group.any().enqueue(job)
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C) {
        enqueue(job, after: clock.now.duration(to: instant), tolerance: tolerance, clock: clock)
    }

    /// NIO's timers run on `CLOCK_MONOTONIC`, which stops while the machine is suspended: a sleep
    /// on `ContinuousClock` that spans a suspend ends late by that time. The provider's deadlines
    /// do not depend on it: they have timers of their own on `CLOCK_BOOTTIME` (TOK-9).
    func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        guard let delay = delay as? Duration else {
            // A clock whose durations are not `Duration`s: its own platform scheduling.
            Task.platformScheduling.enqueue(job, after: delay, tolerance: tolerance, clock: clock)
            return
        }
        let loop = group.any()
        let unowned = UnownedJob(job)
        let (seconds, attoseconds) = delay.components
        let nanoseconds = max(0, seconds) >= Int64.max / 1_000_000_000 ? Int64.max : max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        loop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            loop.enqueue(ExecutorJob(unowned))
        }
    }
}

/// The executors `main` makes the process's: the main actor's on the main thread
/// (`MainThreadExecutor`), and the default executor on NIO's singleton group (the group
/// AsyncHTTPClient uses too).
public enum EventLoopExecutors {
    /// Makes these the process's executors, runs `body` as the main task and exits with 0 when it
    /// returns. Call it from a synchronous `main`: the executors are fixed by the first job
    /// enqueued, and an `async` main has enqueued one before its body runs. `alongside` runs once
    /// the main task is enqueued (NIO's singleton loops made), on the group's last loop, which the
    /// main task's first steps do not use: what it starts does not compete with the making of the
    /// loops. Not on the main thread: the scheduler wakes the main task's loop on the main
    /// thread's CPU, where it waited until the main thread parked (0.3–0.6 ms of a start, by
    /// `perf record -e sched:sched_switch`), while the other CPU idled.
    public static func main(alongside: @escaping @Sendable () -> Void = {}, _ body: @escaping @Sendable () async -> Void) -> Never {
        _createExecutors(factory: Factory.self)
        Task {
            await body()
            exit(0)
        }
        var loops = MultiThreadedEventLoopGroup.singleton.makeIterator()
        var last: (any EventLoop)?
        while let loop = loops.next() { last = loop }
        last?.execute(alongside)
        // The main thread serves the main actor for the life of the process; a stop ends one run.
        while true { try? MainActor.executor.run() }
    }

    /// Makes NIO's singleton loops on a thread of its own, for `main` to find made: the main
    /// thread meanwhile reads what the start needs that needs no loop (the command line and the
    /// configuration: `WAFTokendCommand.prepare`). Made on the main thread, one after the other and
    /// each waited for, they came before all of it (0.6 ms of the start's path).
    public static func makeLoopsAhead() {
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { _ in
                _ = MultiThreadedEventLoopGroup.singleton
                return nil
            }, nil)
        if created == 0 { pthread_detach(thread) }
    }

    /// The default executor `main` sets, on `group`: for tests, through
    /// `withTaskExecutorPreference`.
    public static func taskExecutor(on group: MultiThreadedEventLoopGroup) -> any TaskExecutor {
        EventLoopTaskExecutor(group: group)
    }

    private enum Factory: ExecutorFactory {
        static let main = MainThreadExecutor()
        static var mainExecutor: any MainExecutor { main }
        static var defaultExecutor: any TaskExecutor { EventLoopTaskExecutor(group: .singleton) }
    }
}

extension Task where Success == Never, Failure == Never {
    fileprivate static var platformScheduling: any SchedulingExecutor {
        // The platform's default executor (libdispatch) schedules every clock.
        (PlatformExecutorFactory.defaultExecutor as? any SchedulingExecutor)!
    }
}
