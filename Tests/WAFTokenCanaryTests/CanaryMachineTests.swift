import Testing
import WAFTestTraits

@testable import WAFTokenCanary

/// The canary's decisions, without I/O or a clock (docs/canary.md).
@Suite("The token canary's decisions", .offPool)
struct CanaryMachineTests {
    static let settings = CanaryMachine.Settings(interval: .seconds(60), maxRetryCount: 3, maxErrorDelay: .seconds(5))

    @Test("CANARY1: an accepted answer: the next probe after canary.intervalSec; no token yet: asked again shortly")
    func CANARY1_accepted() {
        var machine = CanaryMachine(settings: Self.settings)
        #expect(machine.due(token: nil) == [.arm(after: .seconds(1))])
        #expect(machine.due(token: "t1") == [.probe(token: "t1")])
        #expect(machine.answered(.accepted) == [.verdict(.accepted), .arm(after: .seconds(60))])
        #expect(machine.due(token: "t1") == [.probe(token: "t1")])
        #expect(machine.answered(.accepted) == [.arm(after: .seconds(60))], "no news")
    }

    @Test("CANARY2: challenged: one forced refresh, then a probe at once with the new token; accepted again, nothing was rejected")
    func CANARY2_challengedRefreshesOnce() {
        var machine = CanaryMachine(settings: Self.settings)
        _ = machine.due(token: "t1")
        _ = machine.answered(.accepted)
        _ = machine.due(token: "t1")
        #expect(machine.answered(.challenged) == [.forceRefresh])
        #expect(machine.refreshed(token: "t2") == [.probe(token: "t2")])
        #expect(machine.answered(.accepted) == [.arm(after: .seconds(60))], "still accepted: no event")
        #expect(machine.verdict == .accepted)
    }

    @Test(
        "CANARY3: challenged again after a new token, or no new token to try, or a CAPTCHA: rejected; probes follow RET-1…2's back-off until accepted"
    )
    func CANARY3_rejected() {
        var machine = CanaryMachine(settings: Self.settings)
        _ = machine.due(token: "t1")
        _ = machine.answered(.challenged)
        _ = machine.refreshed(token: "t2")
        #expect(machine.answered(.challenged) == [.verdict(.rejected), .arm(after: .milliseconds(100))], "a second challenge after a new token")
        var waits: [Duration] = []
        for _ in 0..<5 {
            _ = machine.due(token: "t2")
            let actions = machine.answered(.captcha)
            if case .arm(let wait)? = actions.last { waits.append(wait) }
        }
        #expect(
            waits == [.milliseconds(200), .milliseconds(400), .seconds(5), .seconds(5), .seconds(5)],
            "RET-1, then every maxErrorTokenRefreshDelayMsec")
        _ = machine.due(token: "t2")
        #expect(machine.answered(.accepted) == [.verdict(.accepted), .arm(after: .seconds(60))], "a later accepted answer clears it")
        var stale = CanaryMachine(settings: Self.settings)
        _ = stale.due(token: "t1")
        _ = stale.answered(.challenged)
        #expect(stale.refreshed(token: "t1") == [.verdict(.rejected), .arm(after: .milliseconds(100))], "the refresh brought no new token")
    }

    @Test("CANARY4: unreachable tells nothing of the token: the verdict stays; the back-off applies")
    func CANARY4_unreachable() {
        var machine = CanaryMachine(settings: Self.settings)
        _ = machine.due(token: "t1")
        _ = machine.answered(.accepted)
        _ = machine.due(token: "t1")
        #expect(machine.answered(.unreachable) == [.arm(after: .milliseconds(100))])
        #expect(machine.verdict == .accepted)
        #expect(CanaryProbe.classify(nil) == .accepted && CanaryProbe.classify("challenge") == .challenged)
        #expect(CanaryProbe.classify("CAPTCHA") == .captcha && CanaryProbe.classify("block") == .challenged)
    }

    @Test(
        "CANARY7: a URL that always challenges forces one refresh per rejection episode: later probes follow the back-off without forcing; an accepted answer ends the episode"
    )
    func CANARY7_oneForcedRefreshPerEpisode() {
        var machine = CanaryMachine(settings: Self.settings)
        var forced = 0
        var token = "t1"
        // A minute of probes against a web ACL that challenges every token, on the back-off.
        var elapsed = Duration.zero
        while elapsed < .seconds(60) {
            var actions = machine.due(token: token)
            actions += machine.answered(.challenged)
            if actions.contains(.forceRefresh) {
                forced += 1
                token = "t\(forced + 1)"
                actions = machine.refreshed(token: token)
                actions += machine.answered(.challenged)
            }
            guard case .arm(let wait)? = actions.last else { Issue.record("no next probe: \(actions)"); return }
            elapsed += wait
        }
        #expect(forced == 1, "\(forced) forced refreshes in a minute")
        #expect(machine.verdict == .rejected)
        // The token changed on its own (the provider's schedule), and is accepted: the episode ends,
        // and a later challenge may force a refresh again.
        _ = machine.due(token: "t9")
        _ = machine.answered(.accepted)
        _ = machine.due(token: "t9")
        #expect(machine.answered(.challenged) == [.forceRefresh], "a new episode")
        var captcha = CanaryMachine(settings: Self.settings)
        _ = captcha.due(token: "t1")
        _ = captcha.answered(.captcha)
        _ = captcha.due(token: "t1")
        #expect(captcha.answered(.challenged) == [.forceRefresh], "an episode that began with a CAPTCHA has its one refresh")
        _ = captcha.refreshed(token: "t2")
        _ = captcha.answered(.challenged)
        _ = captcha.due(token: "t2")
        #expect(captcha.answered(.challenged) == [.arm(after: .milliseconds(400))], "and only one")
    }
}
