import Glibc
import Logging
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

    @Test("SIGTERM asks the stop as it arrives, before any binding")
    func stopAsked() {
        let arming = SignalArming(arming: [])
        arming.deliver(SIGTERM, count: 1)
        #expect(arming.kept() == [SIGTERM])
        #expect(!arming.stop.unlessAsked {}, "the stop is asked")
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
