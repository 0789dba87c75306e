import NIOConcurrencyHelpers

/// What the daemon's connections may hold in memory on behalf of their peers (bodies kept for a
/// replay, challenge answers held back), as one budget for the whole daemon
/// (`limits.bufferedBytes`) and a share of it per uid (TENANT-12). A peer that posts bodies to a
/// slow upstream on a thousand connections once took the daemon past its unit's `MemoryMax`;
/// under the budget, a connection that cannot have more streams or waits instead, and the
/// daemon's memory is its own, not the peers'.
package final class MemoryBudget: Sendable {
    package let total: Int
    /// The most one uid may hold of it.
    package let perUser: Int
    private struct State {
        var used = 0
        var byUser: [UInt32: Int] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// A quarter of the budget per uid: three peers at their share still leave a quarter for
    /// everyone else.
    package static func perUserShare(of total: Int) -> Int { max(1, total / 4) }

    package init(total: Int, perUser: Int? = nil) {
        self.total = total
        self.perUser = perUser ?? Self.perUserShare(of: total)
    }

    /// Takes `bytes` for `uid`, unless that would pass the daemon's budget or the uid's share.
    package func reserve(_ bytes: Int, for uid: UInt32) -> Bool {
        guard bytes > 0 else { return true }
        return state.withLockedValue { state in
            let mine = state.byUser[uid, default: 0]
            guard state.used + bytes <= total, mine + bytes <= perUser else { return false }
            state.used += bytes
            state.byUser[uid] = mine + bytes
            return true
        }
    }

    /// Gives back `bytes` that `uid` reserved.
    package func release(_ bytes: Int, for uid: UInt32) {
        guard bytes > 0 else { return }
        state.withLockedValue { state in
            state.used -= bytes
            let left = state.byUser[uid, default: bytes] - bytes
            state.byUser[uid] = left > 0 ? left : nil
        }
    }

    /// What is held now, in all and by `uid`.
    package var used: Int { state.withLockedValue { $0.used } }
    package func used(by uid: UInt32) -> Int { state.withLockedValue { $0.byUser[uid, default: 0] } }

    /// A holding of one connection: what it reserved is given back when the holding goes (the
    /// request ends, the connection closes), whichever way that happens.
    package final class Holding {
        private let budget: MemoryBudget
        private let uid: UInt32
        package private(set) var bytes = 0

        package init(_ budget: MemoryBudget, uid: UInt32) {
            self.budget = budget
            self.uid = uid
        }

        /// Takes `count` more, or nothing and false.
        package func grow(by count: Int) -> Bool {
            guard budget.reserve(count, for: uid) else { return false }
            bytes += count
            return true
        }

        /// Gives back all it holds.
        package func releaseAll() {
            budget.release(bytes, for: uid)
            bytes = 0
        }

        deinit { budget.release(bytes, for: uid) }
    }
}
