/// Why an action did not do its job, in one sentence for the log (never with the token).
public struct DeliveryFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    /// The command outlived `sinks.onTokenTimeoutSec` and was killed.
    public let timedOut: Bool

    public init(_ description: String, timedOut: Bool = false) {
        self.description = description
        self.timedOut = timedOut
    }
}
