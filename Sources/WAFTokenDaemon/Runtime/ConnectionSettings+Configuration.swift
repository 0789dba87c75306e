import Logging
import WAFDaemonConfiguration
import WAFDaemonTransport

extension ConnectionSettings {
    /// The API socket's: `socket.allowedUsers`, `socket.allowedGroups` and its timeouts.
    init(_ configuration: DaemonConfiguration, logger: Logger) {
        self.init(
            policy: AccessPolicy(
                allowedUsers: configuration[Keys.socketAllowedUsers], allowedGroups: configuration[Keys.socketAllowedGroups], logger: logger),
            idleTimeout: .seconds(Int64(configuration[Keys.socketIdleTimeoutSec])),
            requestTimeout: .seconds(Int64(configuration[Keys.socketRequestTimeoutSec])))
    }
}
