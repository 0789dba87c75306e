import Testing
import WAFServiceManager
import WAFTestTraits

/// The contract between the daemon and a service manager, as far as it holds without a plug-in:
/// the daemon's behaviour under systemd is WAFSystemdTests' to check.
@Suite("The service manager's contract", .offPool)
struct ServiceManagerTests {
    @Test("Without a service manager there is no watchdog to ping, and every notice the daemon sends goes nowhere, at any step")
    func noServiceManagerTakesEveryNotice() {
        let notifier: any ServiceNotifier = NoServiceNotifier()
        #expect(notifier.watchdogInterval == nil)
        // The daemon sends these through its life without asking who listens: start-up, a reload,
        // a stop and a failure must all be safe to send to nobody, in any order, more than once.
        notifier.extendTimeout(by: .seconds(30))
        notifier.status("starting")
        notifier.ready()
        notifier.watchdogPing()
        notifier.reloading()
        notifier.ready()
        notifier.stopping()
        notifier.failing("cannot bind /run/waf-tokend/api.sock", errno: 98)
        notifier.failing("configuration refused", errno: nil)
        #expect(notifier.watchdogInterval == nil, "still none afterwards")
    }

    @Test("An inherited listener is the same only with the same descriptor under the same name")
    func inheritedListenerEquality() {
        let api = InheritedListener(descriptor: 3, name: "waf-tokend.socket")
        #expect(api == InheritedListener(descriptor: 3, name: "waf-tokend.socket"))
        #expect(api != InheritedListener(descriptor: 3, name: "proxy"))
        #expect(api != InheritedListener(descriptor: 4, name: "waf-tokend.socket"))
    }

    @Test("Passed sockets are the same only when the same listeners come in the same order, or the same reason they are unusable")
    func passedSocketsEquality() {
        let api = InheritedListener(descriptor: 3, name: "waf-tokend.socket")
        let proxy = InheritedListener(descriptor: 4, name: "proxy")
        #expect(PassedSockets.sockets([api, proxy]) == .sockets([api, proxy]))
        #expect(PassedSockets.sockets([api, proxy]) != .sockets([proxy, api]))
        #expect(PassedSockets.sockets([api]) != PassedSockets.none)
        #expect(PassedSockets.unusable("a datagram socket") == .unusable("a datagram socket"))
        #expect(PassedSockets.unusable("a datagram socket") != .unusable("a FIFO"))
    }
}
