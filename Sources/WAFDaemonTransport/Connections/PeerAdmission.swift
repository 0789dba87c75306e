import Logging

extension ListenerLimits {
    /// A connection's peer, checked once as it opens, on any listener (the socket API's guard and
    /// the proxy's alike): whether the lists in force let it in, decided before it is counted so
    /// that a refused peer takes no place of the admitted (TENANT-12), and whether the listener's
    /// limits leave room for it (TENANT-6); a refusal of either kind logged once a minute per
    /// uid. `known` nil: the kernel could not say who it is, and nobody is let in. `key`: whom the
    /// limits count it as (its uid unless given). Returns whom it was counted as and whether it is
    /// let in, or nil when the limits are full and the connection must close at once.
    package func admit(
        _ known: PeerCredentials?, as key: Peer? = nil, for owner: any ConnectionGuardContext
    ) -> (peer: Peer, allowed: Bool)? {
        let peer = known ?? PeerCredentials(pid: -1, uid: .max, gid: .max)
        let settings = owner.connectionSettings
        let metadata: Logger.Metadata = ["listener": "\(owner.listenerName)", "uid": "\(peer.uid)", "gid": "\(peer.gid)", "pid": "\(peer.pid)"]
        let allowed = known != nil && settings.policy.allows(peer)
        let key = key ?? .uid(peer.uid)
        switch admit(key, allowed: allowed, settings: settings) {
        case .admitted:
            break
        case let full:
            // A peer that holds thousands of connections gets no more.
            let limit =
                full == .listenerFull
                ? "socket.maxConnections (\(settings.maxConnections))" : "socket.maxConnectionsPerUser (\(settings.maxConnectionsPerUser))"
            log("full", uid: peer.uid, level: .warning, "connection closed: \(limit) reached", metadata: metadata, logger: owner.logger)
            return nil
        }
        if !allowed {
            log(
                "refused", uid: peer.uid, level: .notice, "connection refused by the \(owner.listenerName)'s access policy", metadata: metadata,
                logger: owner.logger)
        }
        return (key, allowed)
    }
}
