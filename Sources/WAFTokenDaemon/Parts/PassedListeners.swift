import Logging
import WAFDaemonTransport
import WAFServiceManager

#if canImport(Glibc)
import Glibc
#endif

/// The listening sockets the service manager passed, handed to the listeners they are for: the
/// API socket (named `api`, or the only socket passed, as before names), and each other listener
/// whose configured address is the socket's (a proxy's `proxy.listen`, `metrics.listen`,
/// `auth.listen`). A listener without a passed socket binds its own; a passed socket no
/// listener claims is logged and closed, never served by accident.
struct PassedListeners {
    private var remaining: [(listener: InheritedListener, address: Listener.Address?)]
    private let count: Int

    init(_ listeners: [InheritedListener]) {
        remaining = listeners.map { ($0, Listener.Address.bound($0.descriptor)) }
        count = listeners.count
    }

    var isEmpty: Bool { count == 0 }

    /// The API socket's descriptor: the Unix socket named `api`, else the only one passed, if a
    /// Unix socket. Never a TCP socket, whatever its name: the API's peer check is `SO_PEERCRED`,
    /// which a TCP peer does not answer, and every endpoint (tokens included) would be on the
    /// network (it stays unclaimed, and is logged and closed).
    mutating func takeAPI() -> CInt? {
        let isUnix = { (entry: (listener: InheritedListener, address: Listener.Address?)) -> Bool in
            if case .unix? = entry.address { true } else { false }
        }
        let index =
            remaining.firstIndex { $0.listener.name == "api" && isUnix($0) }
            ?? (count == 1 ? remaining.firstIndex(where: isUnix) : nil)
        guard let index else { return nil }
        return remaining.remove(at: index).listener.descriptor
    }

    /// The descriptor of the passed socket that listens at `address`, if one does.
    mutating func take(_ address: Listener.Address) -> CInt? {
        guard let index = remaining.firstIndex(where: { $0.address?.sameEndpoint(as: address) == true }) else { return nil }
        return remaining.remove(at: index).listener.descriptor
    }

    /// Closes what no listener took, saying so.
    mutating func closeUnclaimed(logger: Logger) {
        for (listener, address) in remaining {
            logger.warning(
                "a socket the service manager passed matches no configured listener; closed",
                metadata: ["name": "\(listener.name)", "address": "\(address?.description ?? "unknown")"])
            close(listener.descriptor)
        }
        remaining = []
    }
}
