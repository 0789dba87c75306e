import Testing
import WAFTestTraits

@testable import WAFDelivery

/// `waf-tokend exec`'s decisions about its child.
@Suite("Delivery: the exec supervisor's decisions", .offPool)
struct SupervisorMachineTests {
    @Test("EXEC1: the child's end is the supervisor's, its status as a shell reports it")
    func EXEC1_childStatusIsTheExit() {
        var machine = SupervisorMachine(onToken: .none)
        #expect(machine.tokenArrived() == [])
        #expect(machine.childEnded(status: 3) == [.cancelKill, .exit(3)])
    }

    @Test("EXEC2: SIGTERM, SIGINT and SIGHUP go on to the child; after SIGTERM its end is the exit")
    func EXEC2_signalsForwarded() {
        var machine = SupervisorMachine(onToken: .hup)
        #expect(machine.signalled(1) == [.signal(1)])
        #expect(machine.signalled(15) == [.signal(15)])
        #expect(machine.tokenArrived() == [], "stopping: no signal for a new token")
        #expect(machine.childEnded(status: 143) == [.cancelKill, .exit(143)])
    }

    @Test("EXEC3: on-token hup signals the child; restart ends it (SIGKILL after the grace) and starts it again")
    func EXEC3_onToken() {
        var hup = SupervisorMachine(onToken: .hup)
        #expect(hup.tokenArrived() == [.signal(1)])
        var restart = SupervisorMachine(onToken: .restart)
        #expect(restart.tokenArrived() == [.signal(15), .armKill(SupervisorMachine.restartGrace)])
        #expect(restart.tokenArrived() == [], "one restart at a time: the new child reads the newest file")
        #expect(restart.killDue() == [.signal(9)])
        #expect(restart.childEnded(status: 137) == [.cancelKill, .spawn], "a new child, not the exit")
        #expect(restart.childEnded(status: 0) == [.cancelKill, .exit(0)])
        var stopped = SupervisorMachine(onToken: .restart)
        _ = stopped.tokenArrived()
        #expect(stopped.signalled(15) == [.signal(15)])
        #expect(stopped.childEnded(status: 143) == [.cancelKill, .exit(143)], "SIGTERM during a restart: no new child")
    }
}
