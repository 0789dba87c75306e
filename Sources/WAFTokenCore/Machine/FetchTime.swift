#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// TOK-8: whether the fetch time of a token handed in from outside can be trusted, and its age.
///
/// A time in the future (a clock set back, a device that booted with a wrong clock), one before
/// 2020, or one that is no valid date at all is not trusted: the token is stale at once. Nothing
/// here can trap, whatever the date.
enum FetchTime {
    /// 2020-01-01T00:00:00Z: AWS WAF tokens did not exist before.
    static let earliest = Date(timeIntervalSince1970: 1_577_836_800)

    /// The token's age at `wallNow`, or nil when `fetchedAt` is not to be trusted. NaN compares
    /// false, so a date that is no date fails every check.
    static func trustedAge(of fetchedAt: Date, at wallNow: Date) -> Duration? {
        let age = wallNow.timeIntervalSince(fetchedAt)
        // Not in the future; and under 30 years, which also keeps the conversion below in range
        // when the wall clock itself is absurd.
        guard fetchedAt >= earliest, age >= 0, age < 1e9 else { return nil }
        return .nanoseconds(Int64((age * 1e9).rounded(.down)))
    }
}
