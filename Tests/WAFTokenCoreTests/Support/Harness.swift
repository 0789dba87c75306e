import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing
import WAFTokenCoreTestKit

@testable import WAFTokenCore

extension WAFConfiguration {
    /// A valid configuration for tests; anything not given is the SDK's default.
    static func test(
        backgroundRefreshEnabled: Bool = true,
        maxErrorTokenRefreshDelayMsec: Int = 5000,
        maxRetryCount: Int? = nil,
        setTokenCookie: Bool = true,
        tokenCookiePath: String = "/",
        tokenRefreshDelaySec: Int? = nil,
        ranges: WAFRangeProfile = .seed,
        domainName: String = "example.com"
    ) -> WAFConfiguration {
        try! WAFConfiguration(
            applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/",
            domainName: domainName, backgroundRefreshEnabled: backgroundRefreshEnabled,
            maxErrorTokenRefreshDelayMsec: maxErrorTokenRefreshDelayMsec, maxRetryCount: maxRetryCount,
            setTokenCookie: setTokenCookie, tokenCookiePath: tokenCookiePath,
            tokenRefreshDelaySec: tokenRefreshDelaySec, ranges: ranges)
    }
}

/// A provider on a virtual clock with a scripted token service. Jitter is off unless asked for, so
/// that every wait is exact.
struct Harness {
    let scheduler: VirtualScheduler
    let service: ScriptedTokenFetcher
    let provider: WAFTokenProvider
    /// What the provider asked to store, in order.
    let persisted: Recorder<WAFTokenRecord>
    /// What the provider announced, in order, recorded as it happened.
    let events: Recorder<WAFProviderEvent>

    init(
        _ configuration: WAFConfiguration = .test(),
        script: [ScriptedTokenFetcher.Step] = [],
        then fallback: ScriptedTokenFetcher.Step = .success,
        latency: Duration = .zero,
        profile: WAFLifecycleProfile = .ios,
        jitter: Bool = false,
        randomUnit: @escaping @Sendable () -> Double = { 1 },
        cookieSecure: Bool = false,
        restoredToken: WAFTokenProviderOptions.RestoredToken? = nil,
        wallClockOrigin: Date = Date(timeIntervalSince1970: 1_700_000_000)
    ) {
        scheduler = VirtualScheduler(wallClockOrigin: wallClockOrigin)
        service = ScriptedTokenFetcher(scheduler: scheduler, script: script, then: fallback, latency: latency)
        let persisted = Recorder<WAFTokenRecord>()
        self.persisted = persisted
        provider = WAFTokenProvider(
            configuration: configuration, fetcher: service, scheduler: scheduler,
            options: WAFTokenProviderOptions(
                lifecycleProfile: profile, jitter: jitter, randomUnit: randomUnit, cookieSecure: cookieSecure,
                restoredToken: restoredToken, persist: { persisted.append($0) }, logger: .quiet))
        let events = Recorder<WAFProviderEvent>()
        self.events = events
        provider.observe { events.append($0) }
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
func failures(_ count: Int, _ error: SdkError = ScriptedTokenFetcher.outage) -> [ScriptedTokenFetcher.Step] {
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

/// Values appended from any thread (the provider's state context), read by the test. Nothing waits:
/// in virtual time everything has happened once the test has driven the scheduler.
final class Recorder<Value: Sendable>: Sendable {
    private let values = NIOLockedValueBox<[Value]>([])

    func append(_ value: Value) {
        values.withLockedValue { $0.append(value) }
    }

    var all: [Value] { values.withLockedValue { $0 } }
    var count: Int { all.count }
}

extension Recorder where Value == WAFProviderEvent {
    /// The lifecycle announcements, in order.
    var lifecycles: [WAFProviderStatus.Lifecycle] {
        all.compactMap { event in
            if case .lifecycleChanged(let lifecycle) = event { lifecycle } else { nil }
        }
    }

    /// The values of the tokens announced, in order.
    var tokens: [String] {
        all.compactMap { event in
            if case .tokenUpdated(let token, _) = event { token.value } else { nil }
        }
    }
}

extension NIOLockedValueBox {
    /// The value now, for assertions.
    var value: Value { withLockedValue { $0 } }
}

extension Logger {
    /// The provider's log is not what these tests check, and would bury their output.
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
}
