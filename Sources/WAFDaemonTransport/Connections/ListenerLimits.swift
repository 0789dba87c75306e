import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// One listener's share of what a peer may take (TENANT-6): at most `socket.maxConnections`
/// connections, at most `socket.maxConnectionsPerUser` from one uid; beyond either a new
/// connection is closed at once. What it refuses, and the peers its lists refuse, are logged at
/// most once a minute per uid, with how many there were: a peer that is refused in a loop cannot
/// fill the journal.
package final class ListenerLimits: Sendable {
    private struct State {
        var open = 0
        var byUser: [UInt32: Int] = [:]
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

    /// Counts a connection from `uid` in, unless it would pass a limit.
    package func admit(uid: UInt32, settings: ConnectionSettings) -> Admission {
        state.withLockedValue { state in
            if state.open >= settings.maxConnections { return .listenerFull }
            if state.byUser[uid, default: 0] >= settings.maxConnectionsPerUser { return .userFull }
            state.open += 1
            state.byUser[uid, default: 0] += 1
            return .admitted
        }
    }

    /// An admitted connection of `uid` closed.
    package func release(uid: UInt32) {
        state.withLockedValue { state in
            state.open -= 1
            let left = state.byUser[uid, default: 1] - 1
            state.byUser[uid] = left > 0 ? left : nil
        }
    }

    package var openConnections: Int { state.withLockedValue { $0.open } }

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
