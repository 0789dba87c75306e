import Testing
import WAFTestTraits

@testable import WAFDelivery

/// `waf-tokend exec`'s decisions about its child.
@Suite("Delivery: the exec supervisor's decisions", .offPool)
struct SupervisorMachineTests {
    @Test("EXEC1: the child's end is the supervisor's, its status as a shell reports it")
    func EXEC1_childStatusIsTheExit() {
        var machine = SupervisorMachine(onToken: .none)
        #expect(machine.tokenArrived() == [], "no child before the first token is stored")
        #expect(machine.firstTokenStored() == [.spawn])
        #expect(machine.firstTokenStored() == [])
        #expect(machine.tokenArrived() == [])
        #expect(machine.childEnded(status: 3) == [.cancelKill, .exit(3)])
    }

    @Test("EXEC2: SIGTERM, SIGINT and SIGHUP go on to the child; after SIGTERM its end is the exit")
    func EXEC2_signalsForwarded() {
        var machine = SupervisorMachine(onToken: .hup)
        _ = machine.firstTokenStored()
        #expect(machine.signalled(1) == [.signal(1)])
        #expect(machine.signalled(15) == [.signal(15)])
        #expect(machine.tokenArrived() == [], "stopping: no signal for a new token")
        #expect(machine.childEnded(status: 143) == [.cancelKill, .exit(143)])
    }

    @Test("EXEC3: on-token hup signals the child; restart ends it (SIGKILL after the grace) and starts it again")
    func EXEC3_onToken() {
        var hup = SupervisorMachine(onToken: .hup)
        _ = hup.firstTokenStored()
        #expect(hup.tokenArrived() == [.signal(1)])
        var restart = SupervisorMachine(onToken: .restart)
        _ = restart.firstTokenStored()
        #expect(restart.tokenArrived() == [.signalGroup(15), .armKill(SupervisorMachine.restartGrace)])
        #expect(restart.tokenArrived() == [], "one restart at a time: the new child reads the newest file")
        #expect(restart.killDue() == [.signalGroup(9)])
        #expect(restart.childEnded(status: 137) == [.cancelKill, .spawn], "a new child, not the exit")
        #expect(restart.childEnded(status: 0) == [.cancelKill, .exit(0)])
        var stopped = SupervisorMachine(onToken: .restart)
        _ = stopped.firstTokenStored()
        _ = stopped.tokenArrived()
        #expect(stopped.signalled(15) == [.signal(15)])
        #expect(stopped.childEnded(status: 143) == [.cancelKill, .exit(143)], "SIGTERM during a restart: no new child")
    }

    @Test("EXEC2: SIGTERM or SIGINT before the first token: no child ever, and the exit is 128+N; SIGHUP then is nobody's")
    func EXEC2_stopBeforeTheChild() {
        var machine = SupervisorMachine(onToken: .hup)
        #expect(machine.signalled(1) == [])
        #expect(machine.signalled(15) == [.exit(143)])
        #expect(machine.firstTokenStored() == [], "the child never starts")
        var interrupted = SupervisorMachine(onToken: .none)
        #expect(interrupted.signalled(2) == [.exit(130)])
    }

    @Test("EXEC4: no first token in time: 69 and no child; once the child runs, a late verdict changes nothing")
    func EXEC4_noFirstToken() {
        var machine = SupervisorMachine(onToken: .none)
        #expect(machine.firstTokenMissing() == [.exit(69)])
        #expect(machine.firstTokenStored() == [])
        var running = SupervisorMachine(onToken: .none)
        _ = running.firstTokenStored()
        #expect(running.firstTokenMissing() == [])
    }

    @Test("EXEC2: cancelled from inside (another part failed): SIGTERM to the child and SIGKILL after the grace; before a child, 143")
    func EXEC2_cancelled() {
        var machine = SupervisorMachine(onToken: .none)
        _ = machine.firstTokenStored()
        #expect(machine.cancelled() == [.signalGroup(15), .armKill(SupervisorMachine.restartGrace)])
        #expect(machine.killDue() == [.signalGroup(9)])
        #expect(machine.childEnded(status: 137) == [.cancelKill, .exit(137)])
        var early = SupervisorMachine(onToken: .none)
        #expect(early.cancelled() == [.exit(143)])
    }
}
