import Glibc
import Logging
import Synchronization
import Testing
import WAFTestTraits

@testable import WAFTokenDaemon

/// The sources armed as a start begins, before what they act on exists: what arrives meanwhile is
/// handed over at the binding, in order and counted, never lost. In this process, SIGUSR1 and
/// SIGUSR2 only (the test runner keeps its SIGTERM, SIGINT and SIGHUP).
@Suite("Signals armed before the signal service exists", .offPool, .timeLimit(.minutes(1)))
struct SignalArmingTests {
    @Test("A signal before the binding is handed over at it, in order, then every later one at once")
    func keptUntilBound() async throws {
        let arming = SignalArming(reloadsOnHangUp: false, stopsOnTerminate: false)
        arming.waitUntilArmed(logger: Logger(label: "test"))
        let seen = Mutex<[Int32]>([])
        kill(getpid(), SIGUSR2)
        kill(getpid(), SIGUSR1)
        // Handled on the arming's queue; nothing to hand them to yet.
        try await Task.sleep(for: .milliseconds(200))
        arming.bind { signal, count in seen.withLock { $0 += Array(repeating: signal, count: count) } }
        #expect(await eventually { seen.withLock { $0 } == [SIGUSR2, SIGUSR1] }, "kept and handed over in order: \(seen.withLock { $0 })")
        kill(getpid(), SIGUSR2)
        #expect(await eventually { seen.withLock { $0 } == [SIGUSR2, SIGUSR1, SIGUSR2] }, "\(seen.withLock { $0 })")
        #expect(arming.stop.unlessAsked {}, "USR1 and USR2 ask no stop")
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
