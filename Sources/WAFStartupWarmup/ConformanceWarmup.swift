import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Asks the Swift runtime, on a thread of its own, the protocol conformance questions a start
/// will ask it on its way to `READY=1`, so that they are answered from its cache when they come.
///
/// Why: a question the runtime has not cached scans every conformance record of the binary (7,732
/// of them in the daemon, about 80 µs), and a start asks 12 such questions (40 before the release
/// build reached generic metadata by accessor), one after another, on one thread, while the
/// second core idles
/// (docs/performance.md, "Start-up: what stands in the way"). The answers are pure and the
/// runtime's cache is safe to fill from any thread: a name that no longer resolves after a
/// dependency's update is skipped (and fails `ConformanceWarmupTests`), a question it has not
/// reached yet is asked on the start's path as before. What it can cost the start beyond its own
/// time is a wait for a cache entry it is making, which is why it runs only at `SCHED_IDLE` and
/// only while a CPU is free (`hostHasIdleCPU`).
public enum ConformanceWarmup {
    /// A type, or a protocol's existential metatype (`any P.Type`): by itself where it is public,
    /// by its mangled name where it is internal to the package that asks (NIO's pipeline
    /// handlers, pools and sockets, swift-crypto's hash functions). A name costs the runtime a
    /// scan of the binary's type or protocol records, once.
    public enum Name: Sendable, CustomStringConvertible {
        case type(any Any.Type)
        case mangled(String)

        var resolved: (any Any.Type)? {
            switch self {
            case .type(let type): type
            case .mangled(let name): _typeByName(name)
            }
        }

        public var description: String {
            switch self {
            case .type(let type): _typeName(type)
            case .mangled(let name): name
            }
        }
    }

    public struct Check: Sendable, CustomStringConvertible {
        public let type: Name
        public let conformsTo: Name

        public init(_ type: Name, _ conformsTo: Name) {
            self.type = type
            self.conformsTo = conformsTo
        }

        public var description: String { "\(type) : \(conformsTo)" }
    }

    /// Starts the warm-up and returns at once, whether it started; does nothing where the process
    /// has one CPU to run on (its cgroup's quota and cpuset by NIO's count, or one singleton loop
    /// by NIO_SINGLETON_GROUP_LOOP_COUNT; its affinity by `allowedCPUs`), where the warm-up would
    /// take the start's own time, nor, `onlyIfIdle`, while no CPU of the host is idle
    /// (`hostHasIdleCPU`). `checks` is called on the warm-up's thread, and only once it runs at
    /// `SCHED_IDLE`: the metadata of the types it names is made there, not on the start's path.
    @discardableResult
    public static func start(onlyIfIdle: Bool = true, _ checks: @escaping @Sendable () -> [Check]) -> Bool {
        // The singleton group's loop count, read when it was made: NIO's count of the cgroup's
        // CPUs, or NIO_SINGLETON_GROUP_LOOP_COUNT where set (`System.coreCount` read the cgroup's
        // files again on the start's path, 0.2 ms). First: with one loop, this runs on the start's
        // own loop, and nothing more is read.
        guard NIOSingletons.groupLoopCountSuggestion > 1 else { return false }
        let allowed = allowedCPUs()
        guard allowed ?? 2 > 1, !onlyIfIdle || hostHasIdleCPU(allowed: allowed) else { return false }
        let box = Unmanaged.passRetained(Box(checks)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(
            &thread, nil,
            { argument in
                let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
                // SCHED_IDLE (5; sched.h has the name under _GNU_SOURCE only, and glibc's
                // pthread_attr_setschedpolicy refuses it): the scheduler runs the warm-up only
                // where no other thread wants a CPU, and places the start's threads as if it were
                // not there. At the default policy the start's first event loop woke up behind it
                // on its CPU and waited out its slice, 4 ms, while the other CPU idled: so where
                // the policy is refused, no warm-up. The shipped unit refuses it (its system call
                // filter denies @resources; docs/systemd.md, "The sandbox").
                var parameters = sched_param()
                guard sched_setscheduler(0, 5, &parameters) == 0 else { return nil }
                // Its own name in `top` and in `perf` traces, not the loop's it was started from
                // (glibc's pthread_setname_np does this; Swift's Glibc module does not have it).
                let comm = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
                if comm >= 0 {
                    _ = "waf-warmup".withCString { write(comm, $0, strlen($0)) }
                    close(comm)
                }
                ConformanceWarmup.run(box.checks())
                return nil
            }, box)
        guard started == 0 else {
            Unmanaged<Box>.fromOpaque(box).release()
            return false
        }
        pthread_detach(thread)
        return true
    }

    /// Asks every question here and now (a "no" is cached as a "yes" is); returns the checks
    /// whose names did not resolve, which only a stale list has.
    @discardableResult
    public static func run(_ checks: [Check]) -> [Check] {
        checks.filter { answer($0) == nil }
    }

    /// The runtime's answer, nil where a name does not resolve.
    public static func answer(_ check: Check) -> Bool? {
        guard let type = check.type.resolved, let target = check.conformsTo.resolved else { return nil }
        return conforms(type, target)
    }

    private final class Box: Sendable {
        let checks: @Sendable () -> [Check]
        init(_ checks: @escaping @Sendable () -> [Check]) { self.checks = checks }
    }
}

private func conforms(_ type: any Any.Type, _ target: any Any.Type) -> Bool {
    let checker: any Checker.Type = _openExistential(target, do: checkerFor)
    return checker.check(type)
}

private func checkerFor<T>(_: T.Type) -> any Checker.Type { CheckerFor<T>.self }

private protocol Checker {
    static func check(_ type: any Any.Type) -> Bool
}

/// `T` is the existential metatype: the cast is the runtime's conformance check, cached.
private enum CheckerFor<T>: Checker {
    static func check(_ type: any Any.Type) -> Bool { (type as Any) is T }
}
