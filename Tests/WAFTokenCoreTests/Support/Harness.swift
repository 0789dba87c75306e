import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import WAFTokenCore
import WAFTokenCoreTestKit

extension WAFConfiguration {
    /// A valid configuration for tests; anything not given is the SDK's default.
    static func test(
        backgroundRefreshEnabled: Bool = true,
        maxErrorTokenRefreshDelayMsec: Int = 5000,
        maxRetryCount: Int? = nil,
        setTokenCookie: Bool = true,
        tokenCookiePath: String = "/",
        tokenRefreshDelaySec: Int = 300
    ) -> WAFConfiguration {
        try! WAFConfiguration(
            applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/",
            domainName: "example.com", backgroundRefreshEnabled: backgroundRefreshEnabled,
            maxErrorTokenRefreshDelayMsec: maxErrorTokenRefreshDelayMsec, maxRetryCount: maxRetryCount,
            setTokenCookie: setTokenCookie, tokenCookiePath: tokenCookiePath,
            tokenRefreshDelaySec: tokenRefreshDelaySec)
    }
}

/// A provider on a virtual clock with a scripted token service. Jitter is off unless asked for, so
/// that every wait is exact.
struct Harness {
    let scheduler: VirtualScheduler
    let client: FakeTokenServiceClient
    let provider: WAFTokenProvider

    init(
        _ configuration: WAFConfiguration = .test(),
        script: [FakeTokenServiceClient.Step] = [],
        then fallback: FakeTokenServiceClient.Step = .success,
        latency: Duration = .zero,
        profile: WAFLifecycleProfile = .ios,
        jitter: Bool = false,
        randomUnit: @escaping @Sendable () -> Double = { 1 },
        cookieSecure: Bool = false,
        restoredToken: WAFTokenProviderOptions.RestoredToken? = nil
    ) {
        scheduler = VirtualScheduler()
        client = FakeTokenServiceClient(scheduler: scheduler, script: script, then: fallback, latency: latency)
        provider = WAFTokenProvider(
            configuration: configuration, client: client, scheduler: scheduler,
            options: WAFTokenProviderOptions(
                lifecycleProfile: profile, jitter: jitter, randomUnit: randomUnit, cookieSecure: cookieSecure,
                restoredToken: restoredToken))
    }

    /// Virtual time since the origin.
    var elapsed: Duration { scheduler.now.sinceOrigin }

    /// Moves to `seconds` after the origin, taken to the millisecond: `Duration.seconds(1.2)` from a
    /// Double is a hair short of 1.2 s and would leave a job due at exactly 1.2 s unrun.
    func advance(to seconds: Double) {
        scheduler.advance(to: MonotonicInstant(sinceOrigin: .milliseconds(Int64((seconds * 1000).rounded()))))
    }

    func setLifecycle(_ state: WAFLifecycleState) {
        provider.setLifecycle(state)
        scheduler.runUntilIdle()
    }
}

/// Failing steps, `count` of them.
func failures(_ count: Int, _ error: SdkError = FakeTokenServiceClient.outage) -> [FakeTokenServiceClient.Step] {
    Array(repeating: .fail(error), count: count)
}

/// Durations in seconds, for comparing call times with literals.
func seconds(_ values: Double...) -> [Duration] {
    values.map { .milliseconds(Int64(($0 * 1000).rounded())) }
}

/// Records result callbacks with the virtual time at which they ran.
final class CallbackRecorder: Sendable {
    struct Entry: Sendable {
        let token: WAFToken?
        let error: SdkError?
        let at: Duration
        let thread: pthread_t
    }

    private let entries = NIOLockedValueBox<[Entry]>([])
    private let scheduler: (any WAFScheduler)?

    init(scheduler: (any WAFScheduler)? = nil) {
        self.scheduler = scheduler
    }

    var callback: WAFTokenResultCallback {
        { [entries, scheduler] token, error in
            let at = scheduler?.now.sinceOrigin ?? .zero
            entries.withLockedValue { $0.append(Entry(token: token, error: error, at: at, thread: pthread_self())) }
        }
    }

    var all: [Entry] { entries.withLockedValue { $0 } }
    var count: Int { all.count }
    var tokens: [String?] { all.map { $0.token?.value } }
    var errorNames: [String?] { all.map { $0.error?.name } }
}

/// Reads provider events in order. In virtual time the stream is fed while the test drives the
/// scheduler, so after driving it the events are buffered and `next` returns without waiting.
struct EventReader {
    private var iterator: AsyncStream<WAFProviderEvent>.Iterator

    init(_ provider: WAFTokenProvider) {
        iterator = provider.events(bufferingPolicy: .unbounded).makeAsyncIterator()
    }

    mutating func next(_ count: Int) async -> [WAFProviderEvent] {
        var events: [WAFProviderEvent] = []
        while events.count < count, let event = await iterator.next() { events.append(event) }
        return events
    }
}

extension NIOLockedValueBox {
    /// The value now, for assertions.
    var value: Value { withLockedValue { $0 } }
}
