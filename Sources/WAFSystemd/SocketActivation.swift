import CSystemd
import WAFTokenDaemon

#if canImport(Glibc)
import Glibc
#endif

/// A listening socket passed by systemd (socket activation, `sd_listen_fds`).
public enum SocketActivation {
    public enum Inherited: Sendable, Equatable {
        case none
        case socket(CInt)
        /// Sockets were passed, but none is a listening Unix stream socket.
        case unusable(String)
    }

    public static func inheritedSocket() -> Inherited {
        // Unset the variables: a child of the daemon must not think the sockets are its own.
        let count = sd_listen_fds(1)
        if count < 0 { return .unusable("sd_listen_fds failed: \(String(cString: strerror(-count)))") }
        if count == 0 { return .none }
        for descriptor in SD_LISTEN_FDS_START..<(SD_LISTEN_FDS_START + count)
        where sd_is_socket_unix(descriptor, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 {
            return .socket(descriptor)
        }
        return .unusable("none of the \(count) sockets systemd passed is a listening Unix stream socket")
    }
}

extension DaemonIntegration {
    /// systemd: sd_notify and the watchdog, and a socket passed by socket activation.
    public static func systemd(startDemoService: (@Sendable () async throws -> any DemoTokenService)? = nil) -> DaemonIntegration {
        DaemonIntegration(
            makeNotifier: { SystemdNotifier() },
            inheritedSocket: {
                switch SocketActivation.inheritedSocket() {
                case .none: .success(nil)
                case .socket(let descriptor): .success(descriptor)
                case .unusable(let reason): .failure(DaemonFailure(.osError, reason))
                }
            },
            startDemoService: startDemoService)
    }
}
