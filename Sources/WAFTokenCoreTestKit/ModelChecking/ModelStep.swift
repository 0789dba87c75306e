import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One thing that happens to a provider in a model-checking run: time passes, the token service
/// answers, the app moves, a caller asks, a token is loaded, the configuration is reloaded.
public enum ModelStep: Sendable, Hashable, CustomStringConvertible {
    /// Virtual time passes; due timers fire in order.
    case advance(Duration)
    /// The fetch in flight (if any) succeeds, or fails with the error of that index.
    case fetchSucceeds
    case fetchFails(Int)
    case lifecycle(WAFLifecycleState)
    case request(ProviderMachine.Request)
    /// The waiting caller of that index (in the order they asked) stops waiting (TENANT-12).
    case withdraw(Int)
    /// `loadTokenIntoProvider` with a fetch time this far before now (negative: in the future),
    /// or with one of the absurd dates of `ModelStep.absurdDates`.
    case load(secondsAgo: Double)
    case loadAbsurd(Int)
    /// A reload with the settings variant of that index (some change the identity).
    case reload(Int)
    case stop

    /// Every error kind a fetch can fail with.
    public static let errors: [SdkError] = [
        .errorInvokingGetChallengeEndpoint("HTTP 503"), .invalidChallenge("bad"), .errorRunningChallenge("solver"),
        .invalidVerifyChallengeRequest("encode"), .invalidVerifyChallengeResponse("no token"),
        .errorInvokingVerifyEndpoint("HTTP 500"), .networkUnavailable("unreachable"),
    ]

    /// Dates no provider should ever trust, or crash on.
    public static let absurdDates: [Date] = [
        .distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -62_135_596_800),
        Date(timeIntervalSince1970: 1_900_000_000), Date(timeIntervalSinceReferenceDate: .nan),
        Date(timeIntervalSinceReferenceDate: .infinity), Date(timeIntervalSinceReferenceDate: -.infinity),
        Date(timeIntervalSinceReferenceDate: .greatestFiniteMagnitude),
    ]

    public var description: String {
        switch self {
        case .advance(let duration): "advance(\(duration))"
        case .fetchSucceeds: "fetchSucceeds"
        case .fetchFails(let index): "fetchFails(\(Self.errors[index % Self.errors.count].name))"
        case .lifecycle(let state): "lifecycle(\(state))"
        case .request(let request): "request(\(request))"
        case .withdraw(let index): "withdraw(\(index))"
        case .load(let ago): "load(secondsAgo: \(ago))"
        case .loadAbsurd(let index): "loadAbsurd(\(Self.absurdDates[index % Self.absurdDates.count]))"
        case .reload(let index): "reload(\(index))"
        case .stop: "stop"
        }
    }

    /// A random sequence of `count` steps, weighted towards what happens most: time passing and
    /// the service answering. Durations cluster around the rules' own scales (100 ms backoff, the
    /// error-phase wait, the refresh delay) so that every boundary is hit often.
    public static func sequence(count: Int, using random: inout SplitMix64, reloadVariants: Int) -> [ModelStep] {
        (0..<count).map { _ in step(using: &random, reloadVariants: reloadVariants) }
    }

    static func step(using random: inout SplitMix64, reloadVariants: Int) -> ModelStep {
        let pick = random.next() % 100
        switch pick {
        case 0..<30: return .advance(duration(using: &random))
        case 30..<45: return .fetchSucceeds
        case 45..<60: return .fetchFails(Int(random.next() % UInt64(errors.count)))
        case 60..<70: return .lifecycle(WAFLifecycleState.allCases[Int(random.next() % 3)])
        case 70..<80:
            let requests: [ProviderMachine.Request] = [.ready(force: false), .ready(force: true), .onDemand]
            return .request(requests[Int(random.next() % 3)])
        case 80..<82: return .withdraw(Int(random.next() % 4))
        case 82..<85: return .load(secondsAgo: [-60, 0, 1, 150, 299, 300, 301, 3600, 86_400 * 400][Int(random.next() % 9)])
        case 85..<88: return .loadAbsurd(Int(random.next() % UInt64(absurdDates.count)))
        case 88..<97: return .reload(Int(random.next() % UInt64(max(1, reloadVariants))))
        default: return random.next() % 4 == 0 ? .stop : .advance(.seconds(1))
        }
    }

    static func duration(using random: inout SplitMix64) -> Duration {
        let scales: [Duration] = [
            .milliseconds(1), .milliseconds(100), .seconds(1), .seconds(5), .seconds(30), .seconds(88), .seconds(300), .seconds(600),
        ]
        let scale = scales[Int(random.next() % UInt64(scales.count))]
        // Around the scale: just under, exactly, just over, or a random fraction of it.
        switch random.next() % 4 {
        case 0: return scale - .nanoseconds(1)
        case 1: return scale
        case 2: return scale + .nanoseconds(1)
        default: return scale.scaled(by: random.unit())
        }
    }
}
