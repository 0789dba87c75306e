import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One listener's share of what a peer may take (TENANT-6): at most `socket.maxConnections`
/// connections, at most `socket.maxConnectionsPerUser` from one uid; beyond either a new
/// connection is closed at once. A peer the lists refuse counts apart, in a bucket of its own
/// with the same limits (TENANT-12): it waits for its 403 without taking a place an admitted peer
/// could have. On `metrics.listen`, whose peers are on the network, "one uid" is one address.
/// What it refuses, and the peers its lists refuse, are logged at most once a minute per uid,
/// with how many there were: a peer that is refused in a loop cannot fill the journal.
package final class ListenerLimits: Sendable {
    /// Whose connections count together: a local uid, or a remote address.
    package enum Peer: Hashable, Sendable {
        case uid(UInt32)
        case address(String)
    }

    private struct Counts {
        var open = 0
        var byPeer: [Peer: Int] = [:]

        mutating func admit(_ peer: Peer, settings: ConnectionSettings) -> Admission {
            if open >= settings.maxConnections { return .listenerFull }
            if byPeer[peer, default: 0] >= settings.maxConnectionsPerUser { return .userFull }
            open += 1
            byPeer[peer, default: 0] += 1
            return .admitted
        }

        mutating func release(_ peer: Peer) {
            open -= 1
            let left = byPeer[peer, default: 1] - 1
            byPeer[peer] = left > 0 ? left : nil
        }
    }

    private struct State {
        var admitted = Counts()
        var refused = Counts()
        /// Per reason and uid: when its minute began, and how many were not logged since.
        var logged: [LogKey: (since: Int, unlogged: Int)] = [:]
    }

    private struct LogKey: Hashable {
        let reason: String
        let uid: UInt32
    }

    package enum Admission: Equatable {
        case admitted
        case listenerFull
        case userFull
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    /// Counts a connection from `peer` in, unless it would pass a limit: among the admitted when
    /// the lists let it in, else among the refused.
    package func admit(_ peer: Peer, allowed: Bool, settings: ConnectionSettings) -> Admission {
        state.withLockedValue { state in
            allowed ? state.admitted.admit(peer, settings: settings) : state.refused.admit(peer, settings: settings)
        }
    }

    /// A connection counted by `admit(_:allowed:settings:)` closed.
    package func release(_ peer: Peer, allowed: Bool) {
        state.withLockedValue { state in
            if allowed { state.admitted.release(peer) } else { state.refused.release(peer) }
        }
    }

    /// Connections the lists let in, open now.
    package var openConnections: Int { state.withLockedValue { $0.admitted.open } }

    /// Logs `message` for `uid`, unless one for the same reason and uid was logged less than a
    /// minute ago: then it is counted, and the next line that goes out says how many were not.
    package func log(_ reason: String, uid: UInt32, level: Logger.Level, _ message: String, metadata: Logger.Metadata, logger: Logger) {
        let now = Int(time(nil))
        let unlogged: Int? = state.withLockedValue { state in
            let key = LogKey(reason: reason, uid: uid)
            if let entry = state.logged[key], now - entry.since < 60 {
                state.logged[key] = (entry.since, entry.unlogged + 1)
                return nil
            }
            let unlogged = state.logged[key]?.unlogged ?? 0
            // Minutes long gone are forgotten when the table grows: one entry per refused uid.
            if state.logged.count > 4096 { state.logged = state.logged.filter { now - $0.value.since < 60 } }
            state.logged[key] = (now, 0)
            return unlogged
        }
        guard let unlogged else { return }
        var metadata = metadata
        if unlogged > 0 { metadata["more_in_the_last_minute"] = "\(unlogged)" }
        logger.log(level: level, "\(message)", metadata: metadata)
    }
}
