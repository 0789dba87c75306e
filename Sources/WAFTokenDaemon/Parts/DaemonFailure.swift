import WAFDaemonTransport
import WAFTokenProxy

/// Why the daemon stops, with the exit code of the contract (docs/running.md): 78 invalid
/// configuration, 71 the socket cannot be bound or the state cannot be read, 1 anything else.
/// The modules below say what went wrong in their own terms; this is where it becomes an exit code.
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

    init(_ failure: ListenerFailure) {
        self.init(.osError, failure.message)
    }

    init(_ failure: ProxyFailure) {
        switch failure {
        case .listener(let failure): self.init(failure)
        case .settings(let message): self.init(.configuration, message)
        }
    }
}
