import Glibc
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import WAFTestTraits

@testable import WAFTokenDaemon

/// The sources armed as a start begins, before what they act on exists: what arrives meanwhile is
/// handed over at the binding, in order and counted, never lost. The signals are handed to the
/// arming as its sources hand them (`deliver`), not sent to the test runner, whose other suites'
/// threads would take them; SignalTests sends real ones to a daemon.
@Suite("Signals armed before the signal service exists", .offPool, .timeLimit(.minutes(1)))
struct SignalArmingTests {
    @Test("A signal before the binding is kept and handed over at it, in order and counted, then every later one at once")
    func keptUntilBound() async throws {
        let arming = SignalArming(arming: [])
        #expect(arming.waitUntilArmed(logger: Logger(label: "test")), "no sources: armed at once")
        let seen = Mutex<[Int32]>([])
        arming.deliver(SIGUSR2, count: 1)
        #expect(arming.kept() == [SIGUSR2])
        arming.deliver(SIGUSR1, count: 1)
        arming.deliver(SIGUSR2, count: 2)
        #expect(arming.kept() == [SIGUSR2, SIGUSR1, SIGUSR2], "kept until the binding, in order")
        arming.bind { signal, count in seen.withLock { $0 += Array(repeating: signal, count: count) } }
        arming.deliver(SIGUSR1, count: 1)
        #expect(await eventually { seen.withLock { $0 } == [SIGUSR2, SIGUSR1, SIGUSR2, SIGUSR2, SIGUSR1] }, "\(seen.withLock { $0 })")
        #expect(arming.kept() == [])
        #expect(arming.stop.unlessAsked {}, "USR1 and USR2 ask no stop")
    }

    @Test("SIGTERM asks the stop as it arrives, before any binding; a second before the group runs is its default action")
    func stopAsked() async throws {
        let died = Mutex<[Int32]>([])
        let arming = SignalArming(arming: [], stop: StopRequest { signal in died.withLock { $0.append(signal) } })
        arming.deliver(SIGTERM, count: 1)
        #expect(arming.kept() == [SIGTERM])
        #expect(!arming.stop.unlessAsked {}, "the stop is asked")
        #expect(died.withLock { $0 } == [], "one stop: kept for the group")
        arming.deliver(SIGINT, count: 1)
        _ = arming.kept()
        #expect(died.withLock { $0 } == [SIGINT], "a second before the group runs: the default action")

        let coalesced = Mutex<[Int32]>([])
        StopRequest { signal in coalesced.withLock { $0.append(signal) } }.request(SIGTERM, count: 2)
        #expect(coalesced.withLock { $0 } == [SIGTERM], "two delivered at once are two")

        let graceful = Mutex<[Int32]>([])
        let stop = StopRequest { signal in graceful.withLock { $0.append(signal) } }
        stop.attach(ServiceGroup(services: [], logger: Logger(label: "test")))
        stop.request(SIGTERM)
        stop.request(SIGTERM)
        #expect(graceful.withLock { $0 } == [], "once the group is there, every one is its graceful stop")
    }

    private func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }
}
