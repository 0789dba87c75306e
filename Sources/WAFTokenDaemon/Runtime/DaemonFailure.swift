/// Why the daemon stops, with the exit code of the contract (README, "Running"): 78 invalid
/// configuration, 71 the socket cannot be bound or the state cannot be read, 1 anything else.
public struct DaemonFailure: Error, Sendable, CustomStringConvertible {
    public enum Code: Int32, Sendable {
        case failure = 1
        case osError = 71
        case configuration = 78
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
