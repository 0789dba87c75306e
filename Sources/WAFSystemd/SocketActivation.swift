import CSystemd
import WAFServiceManager

#if canImport(Glibc)
import Glibc
#endif

/// The listening sockets systemd passed (socket activation, `sd_listen_fds_with_names`), each with
/// the name its socket unit gave it (`FileDescriptorName=`).
public enum SocketActivation {
    @Sendable public static func inheritedSockets() -> PassedSockets {
        // Unset the variables: a child of the daemon must not think the sockets are its own.
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        if count < 0 { return .unusable("sd_listen_fds failed: \(String(cString: strerror(-count)))") }
        defer {
            if let names {
                for index in 0..<Int(count) { free(names[index]) }
                free(names)
            }
        }
        if count == 0 { return .none }
        var listeners: [InheritedListener] = []
        for index in 0..<count {
            let descriptor = SD_LISTEN_FDS_START + index
            guard sd_is_socket(descriptor, AF_UNSPEC, Int32(SOCK_STREAM.rawValue), 1) > 0 else { continue }
            let name = names?[Int(index)].map { String(cString: $0) } ?? "unknown"
            listeners.append(InheritedListener(descriptor: descriptor, name: name))
        }
        if listeners.isEmpty { return .unusable("none of the \(count) sockets systemd passed is a listening stream socket") }
        return .sockets(listeners)
    }
}
