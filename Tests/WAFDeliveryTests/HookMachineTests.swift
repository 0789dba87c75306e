import NIOConcurrencyHelpers
import Testing
import WAFTestTraits

@testable import WAFDelivery

/// The decisions of one delivery action, without I/O or a clock.
@Suite("Delivery: one action's decisions", .offPool)
struct HookMachineTests {
    @Test("HOOK1: a token starts a run; one that arrives during it makes one more run after it, with the latest token, never a queue")
    func HOOK1_oneRunAtATimeLatestToken() {
        var machine = HookMachine()
        #expect(machine.tokenArrived("a") == [.run(token: "a", attempt: 1)])
        #expect(machine.tokenArrived("b") == [], "a run is under way")
        #expect(machine.tokenArrived("c") == [], "the latest replaces the one waiting")
        #expect(machine.runEnded(success: true) == [.run(token: "c", attempt: 1)], "one more run, with the latest token")
        #expect(machine.runEnded(success: true) == [], "and no queue behind it")
        #expect(!machine.isRunning)
    }

    @Test("HOOK2: a failed run is retried with back-off, doubling to a minute, until the next token, which goes instead")
    func HOOK2_retriedUntilTheNextToken() {
        var machine = HookMachine()
        _ = machine.tokenArrived("a")
        var delays: [Duration] = []
        for attempt in 1...9 {
            let actions = machine.runEnded(success: false)
            guard case .armRetry(let delay)? = actions.first else { Issue.record("\(actions)"); return }
            delays.append(delay)
            #expect(machine.retryDue() == [.run(token: "a", attempt: attempt + 1)])
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        _ = machine.runEnded(success: false)
        #expect(machine.tokenArrived("b") == [.cancelRetry, .run(token: "b", attempt: 1)], "the next token goes at once, the retry is dropped")
        #expect(machine.runEnded(success: true) == [])
    }

    @Test("HOOK2: a token that arrives during a failing run supersedes its retry")
    func HOOK2_newerTokenSupersedesARetry() {
        var machine = HookMachine()
        _ = machine.tokenArrived("a")
        _ = machine.tokenArrived("b")
        #expect(machine.runEnded(success: false) == [.run(token: "b", attempt: 1)], "b, not a retry of a")
    }
}
