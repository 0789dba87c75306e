import Logging
import WAFDaemonTransport

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

    /// The API socket's descriptor: the Unix socket named `api`, else the only one passed.
    mutating func takeAPI() -> CInt? {
        let index =
            remaining.firstIndex { $0.listener.name == "api" }
            ?? (count == 1 ? remaining.firstIndex { if case .unix? = $0.address { true } else { false } } : nil)
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
