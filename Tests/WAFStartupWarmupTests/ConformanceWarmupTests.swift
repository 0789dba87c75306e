import NIOCore
import Synchronization
import Testing
import WAFStartupWarmup
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

@Suite("The start's conformance checks, asked ahead", .offPool, .timeLimit(.minutes(1)))
struct ConformanceWarmupTests {
    /// A dependency's update that renames a type or a protocol the list names (most are internal
    /// to their packages, so only a name reaches them) fails here, not in a slower start.
    @Test("Every name the daemon's list holds resolves in a binary with the daemon's modules")
    func daemonNamesResolve() {
        let checks = ConformanceWarmup.daemon()
        #expect(checks.count > 20)
        #expect(ConformanceWarmup.run(checks).map(\.description) == [])
    }

    @Test("A name that does not resolve is returned and skipped; a type that does not conform is asked all the same")
    func staleNames() {
        struct NotHashable {}
        let hashable = ConformanceWarmup.Name.type((any Hashable.Type).self)
        let checks = [
            ConformanceWarmup.Check(.mangled("13NoSuchModule0A4TypeV"), hashable),
            ConformanceWarmup.Check(.type(NotHashable.self), hashable),
            ConformanceWarmup.Check(.type(Int.self), .mangled("13NoSuchModule0A8ProtocolP_pXp")),
        ]
        #expect(ConformanceWarmup.run(checks).map(\.description) == [checks[0].description, checks[2].description])
    }

    @Test("The check is the runtime's answer for the type itself, conditional conformances included")
    func answers() {
        struct NotHashable {}
        let hashable = ConformanceWarmup.Name.type((any Hashable.Type).self)
        let answers = [
            ConformanceWarmup.Check(.type(Int.self), hashable), ConformanceWarmup.Check(.type(NotHashable.self), hashable),
            ConformanceWarmup.Check(.type(Int?.self), hashable), ConformanceWarmup.Check(.type(NotHashable?.self), hashable),
            ConformanceWarmup.Check(.mangled("SS"), .mangled("SH_pXp")), ConformanceWarmup.Check(.type(Int.Type.self), hashable),
        ].map(ConformanceWarmup.answer)
        #expect(answers == [true, false, true, false, true, false])
    }

    /// SCHED_IDLE: at the default policy the warm-up held the CPU that the start's first event
    /// loop woke up on, for its whole slice (docs/performance.md, "Start-up in detail").
    @Test("The warm-up runs on a thread of its own at SCHED_IDLE")
    func runsAtIdlePolicy() async throws {
        // Compared on the warm-up's thread while the caller's is alive: a thread that starts
        // later may be given a finished one's pthread_t.
        let caller = pthread_self()
        let seen = Mutex<(ownThread: Bool, policy: Int32)?>(nil)
        let started = ConformanceWarmup.start {
            seen.withLock { $0 = (pthread_equal(pthread_self(), caller) == 0, sched_getscheduler(0)) }
            return []
        }
        guard System.coreCount > 1 else {
            #expect(!started, "one CPU: no warm-up")
            return
        }
        #expect(started)
        let deadline = ContinuousClock.now + .seconds(10)
        while seen.withLock({ $0 }) == nil {
            guard ContinuousClock.now < deadline else {
                Issue.record("the warm-up did not run within 10 s")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        let (ownThread, policy) = try #require(seen.withLock { $0 })
        #expect(ownThread)
        #expect(policy == 5, "SCHED_IDLE is 5")
    }
}
