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
        #expect(checks.count >= 10)
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

    @Test("It starts only while the host has a CPU nothing else wants: /proc/loadavg's runnable threads")
    func onlyOnAnIdleCPU() {
        #expect(ConformanceWarmup.runnable(fromLoadavg: "0.52 0.58 0.59 3/456 12345\n".utf8) == 3)
        #expect(ConformanceWarmup.runnable(fromLoadavg: "12.00 9.10 8.00 17/2048 99".utf8) == 17)
        #expect(ConformanceWarmup.runnable(fromLoadavg: "0.52 0.58 0.59 3-456 12345".utf8) == nil)
        #expect(ConformanceWarmup.runnable(fromLoadavg: "".utf8) == nil)
        // The start's own runnable threads do not count; another program's on every CPU does.
        #expect(ConformanceWarmup.idle(runnableOnHost: 3, runnableHere: 2, online: 2))
        #expect(ConformanceWarmup.idle(runnableOnHost: 2, runnableHere: 1, online: 2))
        #expect(!ConformanceWarmup.idle(runnableOnHost: 4, runnableHere: 2, online: 2))
        #expect(!ConformanceWarmup.idle(runnableOnHost: 9, runnableHere: 1, online: 8))
        #expect(ConformanceWarmup.isRunnable(stat: "1234 (waf-tokend) R 1 1234 1234 0 -1".utf8))
        #expect(!ConformanceWarmup.isRunnable(stat: "1234 (waf-tokend) S 1 1234 1234 0 -1".utf8))
        // A name may hold a parenthesis and a space: the state follows the last ')'.
        #expect(!ConformanceWarmup.isRunnable(stat: "1234 (a) R (b) S 1 1234".utf8))
        #expect(!ConformanceWarmup.isRunnable(stat: "".utf8))
        #expect(ConformanceWarmup.cpuCount(ofList: "0-1".utf8) == 2)
        #expect(ConformanceWarmup.cpuCount(ofList: " 0-3,8,10-11\t".utf8) == 7)
        #expect(ConformanceWarmup.cpuCount(ofList: "0".utf8) == 1)
        #expect(ConformanceWarmup.cpuCount(ofList: "3-1".utf8) == nil)
        #expect(ConformanceWarmup.cpuCount(ofList: "".utf8) == nil)
        #expect(ConformanceWarmup.cpuCount(ofList: "0-x".utf8) == nil)
        #expect(ConformanceWarmup.cpuCount(ofList: "1-2-3".utf8) == nil)
        #expect(ConformanceWarmup.cpuCount(ofList: "0,,1".utf8) == nil)
        #expect(ConformanceWarmup.cpuCount(ofList: "0 1".utf8) == nil)
        let status = Array("Name:\twaf-tokend\nGroups:\t4 24 27\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t1\n".utf8)
        #expect(ConformanceWarmup.value(of: "Cpus_allowed_list:".utf8, in: status).map { Array($0) } == Array("\t0-1".utf8))
        #expect(ConformanceWarmup.value(of: "Cpus_allowed_list:".utf8, in: Array(status.prefix(40))) == nil)
    }

    /// What the rule reads, read here: a parse that broke on the real files would switch the
    /// warm-up off (or on) in silence.
    @Test("This process's /proc files read as the rule needs them")
    func procFilesRead() throws {
        let loadavg = try #require(ConformanceWarmup.contents(of: "/proc/loadavg"))
        let runnable = try #require(ConformanceWarmup.runnable(fromLoadavg: loadavg))
        #expect(runnable >= 1, "this thread is runnable")
        #expect(ConformanceWarmup.runnableThreadsHere() >= 1, "this thread is runnable")
        let allowed = try #require(ConformanceWarmup.allowedCPUs())
        #expect((1...sysconf(Int32(_SC_NPROCESSORS_ONLN))).contains(allowed))
    }

    /// SCHED_IDLE: at the default policy the warm-up held the CPU that the start's first event
    /// loop woke up on, for its whole slice (docs/performance.md, "Start-up in detail").
    @Test("The warm-up runs on a thread of its own at SCHED_IDLE")
    func runsAtIdlePolicy() async throws {
        // Compared on the warm-up's thread while the caller's is alive: a thread that starts
        // later may be given a finished one's pthread_t.
        let caller = pthread_self()
        let seen = Mutex<(ownThread: Bool, policy: Int32)?>(nil)
        // Not only if idle: the suites run beside this test keep the CPUs busy.
        let started = ConformanceWarmup.start(onlyIfIdle: false) {
            seen.withLock { $0 = (pthread_equal(pthread_self(), caller) == 0, sched_getscheduler(0)) }
            return []
        }
        guard NIOSingletons.groupLoopCountSuggestion > 1, ConformanceWarmup.allowedCPUs() ?? 2 > 1 else {
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
