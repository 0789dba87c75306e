import Logging
import NIOCore
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport

/// The guard both transports perform (the socket API's NIO handler, the proxy's loop), as a value:
/// every phase, deadline and action without a socket or a clock.
@Suite("The connection guard's decisions", .offPool)
struct ConnectionGuardTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    static let settings = ConnectionSettings(
        policy: AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet), idleTimeout: .seconds(60), requestTimeout: .seconds(10))
    static let second: UInt64 = 1_000_000_000
    static let admitted: (peer: ListenerLimits.Peer, allowed: Bool) = (.uid(1000), true)

    static func opened(at now: UInt64 = 0, allowed: Bool = true) -> ConnectionGuard {
        var guardian = ConnectionGuard()
        guardian.accepted(now: now, settings: settings)
        #expect(guardian.admitted((.uid(1000), allowed), now: now, settings: settings) == .none)
        return guardian
    }

    @Test(
        "Until the peer is known it has the request timeout; admitted, the idle timeout; refused by the lists, the request timeout to ask for its 403"
    )
    func admission() {
        var unknown = ConnectionGuard()
        unknown.accepted(now: 0, settings: Self.settings)
        #expect(unknown.deadline == 10 * Self.second && unknown.phase == .idle)
        #expect(Self.opened().deadline == 60 * Self.second)
        #expect(Self.opened(allowed: false).deadline == 10 * Self.second)
    }

    @Test("TENANT6: a connection over the listener's limits closes at once: no linger, no timer, nothing to give back")
    func TENANT6_overTheLimitsClosesAtOnce() {
        var guardian = ConnectionGuard()
        guardian.accepted(now: 0, settings: Self.settings)
        #expect(guardian.admitted(nil, now: 0, settings: Self.settings) == .close)
        #expect(guardian.deadline == nil && guardian.ended() == nil)
    }

    @Test("A request's first bytes start its request timeout, fixed then: more bytes do not move it; serving has none; the answer's end, idle again")
    func phases() {
        var guardian = Self.opened()
        let read = guardian.bytesArrived(now: 5 * Self.second, settings: Self.settings)
        #expect(read)
        #expect(guardian.phase == .receiving && guardian.deadline == 15 * Self.second)
        let readAgain = guardian.bytesArrived(now: 9 * Self.second, settings: Self.settings)
        #expect(readAgain)
        #expect(guardian.deadline == 15 * Self.second, "a body that drips does not move it (TENANT-6)")
        guardian.requestStarted()
        #expect(guardian.phase == .serving && guardian.deadline == nil)
        #expect(guardian.responseFinished(partial: false, now: 20 * Self.second, settings: Self.settings) == .none)
        #expect(guardian.phase == .idle && guardian.deadline == 80 * Self.second)
        guardian.requestStarted()
        #expect(guardian.responseFinished(partial: true, now: 30 * Self.second, settings: Self.settings) == .none)
        #expect(guardian.phase == .receiving && guardian.deadline == 40 * Self.second, "the next request's part is there: its request time")
    }

    @Test("Each phase's timeout: idle closes cleanly, a request not all there gets 408, lingering closes")
    func expiries() {
        var idle = Self.opened()
        #expect(idle.expired() == .closeCleanly)
        var receiving = Self.opened()
        _ = receiving.bytesArrived(now: 0, settings: Self.settings)
        #expect(receiving.expired() == .reject(.timedOut))
        #expect(receiving.phase == .serving, "the 408 is being answered: no second one")
        var lingering = Self.opened()
        let closes = lingering.closing(now: 0, queued: false, settings: Self.settings)
        #expect(closes)
        #expect(lingering.deadline == ConnectionGuard.linger)
        let taken = lingering.bytesArrived(now: 0, settings: Self.settings)
        #expect(!taken, "read and dropped while closing")
        let closesAgain = lingering.closing(now: 0, queued: false, settings: Self.settings)
        #expect(!closesAgain, "closed once")
        #expect(lingering.expired() == .close)
    }

    @Test("A clean close with bytes queued has the idle time to send them, then the linger time from its FIN")
    func closing() {
        var guardian = Self.opened()
        let closesWithQueue = guardian.closing(now: 0, queued: true, settings: Self.settings)
        #expect(closesWithQueue)
        #expect(guardian.deadline == 60 * Self.second)
        guardian.outputClosed(now: 2 * Self.second)
        #expect(guardian.deadline == 2 * Self.second + ConnectionGuard.linger)
        guardian.requestStarted()
        #expect(guardian.phase == .lingering, "nothing reopens a closing connection")
    }

    @Test("A stop: a connection between requests gets the drain window, then closes after its next answer; one serving finishes first")
    func drainWindow() {
        var idle = Self.opened()
        idle.stopBegan(now: Self.second, deadline: 5 * Self.second, settings: Self.settings)
        #expect(idle.deadline == Self.second + ConnectionGuard.drainWindow)
        _ = idle.bytesArrived(now: Self.second, settings: Self.settings)
        idle.requestStarted()
        #expect(idle.responseFinished(partial: false, now: Self.second, settings: Self.settings) == .closeCleanly)

        var serving = Self.opened()
        _ = serving.bytesArrived(now: 0, settings: Self.settings)
        serving.requestStarted()
        serving.stopBegan(now: 0, deadline: Self.second / 10, settings: Self.settings)
        #expect(serving.deadline == nil, "the answer under way is not cut by the drain window")
        #expect(serving.responseFinished(partial: false, now: 0, settings: Self.settings) == .closeCleanly)
        var late = Self.opened()
        late.stopBegan(now: 0, deadline: Self.second / 10, settings: Self.settings)
        #expect(late.deadline == Self.second / 10, "never past the stop's deadline")
    }

    @Test("The listener's count is given back once, whichever way the connection ends")
    func countGivenBackOnce() {
        var guardian = Self.opened()
        #expect(guardian.ended()?.peer == .uid(1000))
        #expect(guardian.ended() == nil)
    }
}
