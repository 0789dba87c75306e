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
            requestTimeout: .seconds(Int64(configuration[Keys.socketRequestTimeoutSec])),
            maxConnections: configuration[Keys.socketMaxConnections], maxConnectionsPerUser: configuration[Keys.socketMaxConnectionsPerUser])
    }
}

extension AccessPolicy {
    /// `lifecycle.allowedUsers`/`allowedGroups`, nil when neither is set.
    static func lifecycle(_ configuration: DaemonConfiguration, logger: Logger) -> AccessPolicy? {
        let users = configuration[Keys.lifecycleAllowedUsers], groups = configuration[Keys.lifecycleAllowedGroups]
        guard !users.isEmpty || !groups.isEmpty else { return nil }
        return AccessPolicy(allowedUsers: users, allowedGroups: groups, keyPrefix: "lifecycle", logger: logger)
    }
}
