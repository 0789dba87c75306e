import Logging
import ServiceLifecycle
import Synchronization
import Testing
import WAFProviderRegistry
import WAFServiceManager
import WAFTestTraits

@testable import WAFTokenDaemon

/// The readiness service under a real service group: a SIGTERM the moment the socket accepts is
/// asked before the group runs, and the group then stops every service at once; `READY=1` must not
/// follow the `STOPPING=1` another service sends (SignalTests sees the whole daemon do it).
@Suite("Readiness once a stop was asked", .offPool, .timeLimit(.minutes(1)))
struct ReadinessStopTests {
    @Test("A stop asked before the group runs: no READY=1; none asked: READY=1, then the stop ends the group", arguments: [true, false])
    func noReadyOnceStopAsked(asked: Bool) async throws {
        let notifier = RecordingNotifier()
        let providers = ProviderSet()
        let stop = StopRequest()
        if asked { stop.request() }
        let gate = RecordingGate()
        let readiness = ReadinessService(
            providers: providers, notifier: notifier, waitForToken: false, status: StatusReporter(providers: providers, notifier: notifier),
            stop: stop, reloads: gate)
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: readiness, successTerminationBehavior: .cancelGroup, serviceName: "ReadinessService")],
                logger: Logger(label: "test")))
        stop.attach(group)
        let running = Task { try await group.run() }
        if !asked {
            let deadline = ContinuousClock.now + .seconds(10)
            while notifier.readies == 0 {
                guard ContinuousClock.now < deadline else { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(notifier.readies == 1, "READY=1 within 10 s")
            stop.request()
        }
        try await running.value
        #expect(notifier.readies == (asked ? 0 : 1))
        #expect(gate.released.withLock { $0 } == (asked ? 0 : 1), "the reloads held for the start let go as the group runs, unless it stops")
        #expect(gate.announced.withLock { $0 } == notifier.readies, "reloads tell of themselves after READY=1, and only then")
    }
}

private final class RecordingNotifier: ServiceNotifier {
    private let count = Mutex(0)
    var readies: Int { count.withLock { $0 } }
    func ready() { count.withLock { $0 += 1 } }
    func reloading() {}
    func stopping() {}
    func status(_ line: String) {}
    func extendTimeout(by duration: Duration) {}
    func failing(_ message: String, errno: Int32?) {}
    var watchdogInterval: Duration? { nil }
    func watchdogPing() {}
}

private final class RecordingGate: ReloadGate {
    let released = Mutex(0)
    let announced = Mutex(0)
    func release() { released.withLock { $0 += 1 } }
    func announce() { announced.withLock { $0 += 1 } }
}
