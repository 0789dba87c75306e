import NIOConcurrencyHelpers

/// What the daemon's connections may hold in memory on behalf of their peers, as one budget for
/// the whole daemon (`limits.bufferedBytes`) and a share of it per account (TENANT-12): every byte
/// a proxy connection holds (a head arriving, bodies kept for a replay, challenge answers held
/// back, answers a peer has not read yet) and what each upstream connection holds (its socket and
/// TLS state, `UpstreamCharge`), the idle pool's included. A peer that posts bodies to a slow
/// upstream on a thousand connections once took the daemon past its unit's `MemoryMax`, and a
/// thousand TLS upstream connections did again; under the budget, a connection that cannot have
/// more waits or is refused instead, and the daemon's memory is its own, not the peers'.
package final class MemoryBudget: Sendable {
    /// Whose bytes they are: a peer's uid, or the proxy's idle upstream connections, which belong
    /// to no peer and have a share of their own.
    package enum Account: Hashable, Sendable {
        case uid(UInt32)
        case pool
    }

    package let total: Int
    /// The most one account may hold of it.
    package let perAccount: Int
    private struct State {
        var used = 0
        var byAccount: [Account: Int] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// A quarter of the budget per account: three peers at their share still leave a quarter for
    /// everyone else.
    package static func perUserShare(of total: Int) -> Int { max(1, total / 4) }

    package init(total: Int, perUser: Int? = nil) {
        self.total = total
        perAccount = perUser ?? Self.perUserShare(of: total)
    }

    /// Takes `bytes` for `account`, unless that would pass the daemon's budget or the account's share.
    package func reserve(_ bytes: Int, for account: Account) -> Bool {
        guard bytes > 0 else { return true }
        return state.withLockedValue { state in
            let mine = state.byAccount[account, default: 0]
            guard state.used + bytes <= total, mine + bytes <= perAccount else { return false }
            state.used += bytes
            state.byAccount[account] = mine + bytes
            return true
        }
    }

    /// Gives back `bytes` that `account` reserved.
    package func release(_ bytes: Int, for account: Account) {
        guard bytes > 0 else { return }
        state.withLockedValue { state in
            state.used -= bytes
            let left = state.byAccount[account, default: bytes] - bytes
            state.byAccount[account] = left > 0 ? left : nil
        }
    }

    /// Moves `bytes` that `from` holds to `to`, unless `to`'s share cannot take them (the total
    /// does not change): an upstream connection that goes into the pool, or is taken from it.
    package func transfer(_ bytes: Int, from: Account, to: Account) -> Bool {
        guard bytes > 0, from != to else { return true }
        return state.withLockedValue { state in
            let theirs = state.byAccount[to, default: 0]
            guard theirs + bytes <= perAccount else { return false }
            state.byAccount[to] = theirs + bytes
            let left = state.byAccount[from, default: bytes] - bytes
            state.byAccount[from] = left > 0 ? left : nil
            return true
        }
    }

    /// What is held now, in all and by an account.
    package var used: Int { state.withLockedValue { $0.used } }
    package func used(by account: Account) -> Int { state.withLockedValue { $0.byAccount[account, default: 0] } }
    package func used(by uid: UInt32) -> Int { used(by: .uid(uid)) }

    /// A holding of one connection or request: what it reserved is given back when the holding
    /// goes (the request ends, the connection closes), whichever way that happens.
    package final class Holding {
        private let budget: MemoryBudget
        package private(set) var account: Account
        package private(set) var bytes = 0

        package init(_ budget: MemoryBudget, account: Account) {
            self.budget = budget
            self.account = account
        }

        package convenience init(_ budget: MemoryBudget, uid: UInt32) {
            self.init(budget, account: .uid(uid))
        }

        /// Takes `count` more, or nothing and false.
        package func grow(by count: Int) -> Bool {
            guard budget.reserve(count, for: account) else { return false }
            bytes += count
            return true
        }

        /// Holds `count` from now on: what it held beyond is given back; more is taken if the
        /// budget has it, else the holding stays as it was and false says so.
        package func hold(_ count: Int) -> Bool {
            if count == bytes { return true }
            if count < bytes {
                budget.release(bytes - count, for: account)
                bytes = count
                return true
            }
            return grow(by: count - bytes)
        }

        /// Moves what it holds to `account`, unless that account's share cannot take it.
        package func move(to account: Account) -> Bool {
            guard budget.transfer(bytes, from: self.account, to: account) else { return false }
            self.account = account
            return true
        }

        /// Gives back all it holds.
        package func releaseAll() {
            budget.release(bytes, for: account)
            bytes = 0
        }

        deinit { budget.release(bytes, for: account) }
    }
}
