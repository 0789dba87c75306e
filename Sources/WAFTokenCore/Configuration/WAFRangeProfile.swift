/// Which ranges the integer settings are checked against (CFG-10).
///
/// The seeds' ranges are the default. AWS's current SDK documentation states newer ones; a user who
/// copies them opts in with `ranges: current` rather than being refused with no way out.
public enum WAFRangeProfile: String, Sendable, Hashable, CaseIterable {
    /// The ranges of the SDK documents the project was built from.
    case seed
    /// AWS's current documentation: `tokenRefreshDelaySec` 88…300, `maxRetryCount` 0…100.
    case current

    /// The allowed values of an integer key, nil for the other keys.
    public func range(of key: WAFConfigurationKey) -> ClosedRange<Int>? {
        switch (key, self) {
        case (.maxErrorTokenRefreshDelayMsec, _): 1...30_000
        case (.maxRetryCount, .seed): 0...10
        case (.maxRetryCount, .current): 0...100
        case (.tokenRefreshDelaySec, .seed): 300...600
        case (.tokenRefreshDelaySec, .current): 88...300
        default: nil
        }
    }

    /// `tokenRefreshDelaySec` when none is given.
    public var defaultTokenRefreshDelaySec: Int {
        switch self {
        case .seed: 300
        case .current: 88
        }
    }

    /// The other profiles that would accept `value` for `key`, for an error message (CFG-9).
    func others(accepting value: Int, for key: WAFConfigurationKey) -> [WAFRangeProfile] {
        Self.allCases.filter { $0 != self && $0.range(of: key)?.contains(value) == true }
    }
}
