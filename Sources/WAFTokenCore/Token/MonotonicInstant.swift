/// A point on a scheduler's monotonic clock, as the time elapsed since the scheduler's origin.
///
/// Monotonic time decides ages and deadlines, so that a wall-clock step (NTP, an operator) never
/// makes a token look fresher or older than it is. Instants of different schedulers do not compare.
public struct MonotonicInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var sinceOrigin: Duration

    public init(sinceOrigin: Duration) {
        self.sinceOrigin = sinceOrigin
    }

    public static let origin = MonotonicInstant(sinceOrigin: .zero)

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.sinceOrigin < rhs.sinceOrigin }
    public static func + (lhs: Self, rhs: Duration) -> Self { Self(sinceOrigin: lhs.sinceOrigin + rhs) }
    public static func - (lhs: Self, rhs: Duration) -> Self { Self(sinceOrigin: lhs.sinceOrigin - rhs) }
    public static func - (lhs: Self, rhs: Self) -> Duration { lhs.sinceOrigin - rhs.sinceOrigin }

    public var description: String { "t+\(sinceOrigin.seconds)s" }
}

extension Duration {
    /// The duration in seconds, as a floating-point number (for display and JSON).
    public var seconds: Double {
        let (whole, atto) = components
        return Double(whole) + Double(atto) / 1e18
    }

    /// The duration in whole nanoseconds, saturating at the bounds of `Int64`.
    public var nanoseconds: Int64 {
        let (whole, atto) = components
        let (scaled, multiplyOverflow) = whole.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, addOverflow) = scaled.addingReportingOverflow(atto / 1_000_000_000)
        if multiplyOverflow || addOverflow { return whole < 0 ? .min : .max }
        return sum
    }

    /// `self × factor`, rounded down to the nanosecond, so that a scaled maximum stays a maximum.
    public func scaled(by factor: Double) -> Duration {
        .nanoseconds(Int64((Double(nanoseconds) * factor).rounded(.down)))
    }
}
