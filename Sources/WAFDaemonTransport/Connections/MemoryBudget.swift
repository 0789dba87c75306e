import NIOConcurrencyHelpers
import Synchronization

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

    /// What one account holds. Looked up once (a connection keeps its peer's, the pool its own)
    /// and then counted with atomics: the proxy asks on every read and every request, from each
    /// of its loops, and a lock with a dictionary lookup each time was a tenth of its user time.
    package final class Share: Sendable {
        package let account: Account
        fileprivate let bytes = Synchronization.Atomic<Int>(0)

        fileprivate init(_ account: Account) {
            self.account = account
        }

        package var used: Int { bytes.load(ordering: .relaxed) }
    }

    package let total: Int
    /// The most one account may hold of it.
    package let perAccount: Int
    private let usedBytes = Synchronization.Atomic<Int>(0)
    /// Made on first use and kept: there are as many as peers' uids the daemon has seen.
    private let shares = NIOLockedValueBox<[Account: Share]>([:])

    /// A quarter of the budget per account: three peers at their share still leave a quarter for
    /// everyone else.
    package static func perUserShare(of total: Int) -> Int { max(1, total / 4) }

    package init(total: Int, perUser: Int? = nil) {
        self.total = total
        perAccount = perUser ?? Self.perUserShare(of: total)
    }

    /// `account`'s share, to keep.
    package func share(_ account: Account) -> Share {
        shares.withLockedValue { shares in
            if let share = shares[account] { return share }
            let share = Share(account)
            shares[account] = share
            return share
        }
    }

    /// Takes `bytes` for `share`, unless that would pass the daemon's budget or the account's share.
    package func reserve(_ bytes: Int, for share: Share) -> Bool {
        guard bytes > 0 else { return true }
        guard Self.add(bytes, to: share.bytes, upTo: perAccount) else { return false }
        guard Self.add(bytes, to: usedBytes, upTo: total) else {
            share.bytes.subtract(bytes, ordering: .relaxed)
            return false
        }
        return true
    }

    package func reserve(_ bytes: Int, for account: Account) -> Bool {
        reserve(bytes, for: share(account))
    }

    /// Gives back `bytes` that `share` reserved.
    package func release(_ bytes: Int, for share: Share) {
        guard bytes > 0 else { return }
        share.bytes.subtract(bytes, ordering: .relaxed)
        usedBytes.subtract(bytes, ordering: .relaxed)
    }

    package func release(_ bytes: Int, for account: Account) {
        release(bytes, for: share(account))
    }

    /// Moves `bytes` that `from` holds to `to`, unless `to`'s share cannot take them (the total
    /// does not change): an upstream connection that goes into the pool, or is taken from it.
    package func transfer(_ bytes: Int, from: Share, to: Share) -> Bool {
        guard bytes > 0, from !== to else { return true }
        guard Self.add(bytes, to: to.bytes, upTo: perAccount) else { return false }
        from.bytes.subtract(bytes, ordering: .relaxed)
        return true
    }

    /// Adds `bytes` to `counter` unless it would pass `limit`. Each counter holds to its limit on
    /// its own; a reservation that fails the second gives the first back.
    private static func add(_ bytes: Int, to counter: borrowing Synchronization.Atomic<Int>, upTo limit: Int) -> Bool {
        var current = counter.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = counter.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// What is held now, in all and by an account.
    package var used: Int { usedBytes.load(ordering: .relaxed) }
    package func used(by account: Account) -> Int { shares.withLockedValue { $0[account]?.used ?? 0 } }
    package func used(by uid: UInt32) -> Int { used(by: .uid(uid)) }

    /// A holding of one connection or request: what it reserved is given back when the holding
    /// goes (the request ends, the connection closes), whichever way that happens.
    ///
    /// Its two fields are read and written without the runtime's exclusivity checks: the proxy
    /// moves a holding several times a request (4 % of its user time went to the checks), and no
    /// access to either overlaps another (each method reads or writes them once, around calls
    /// into the budget, which never reaches back into a holding).
    package final class Holding {
        private let budget: MemoryBudget
        @exclusivity(unchecked) package private(set) var share: Share
        @exclusivity(unchecked) package private(set) var bytes = 0

        package var account: Account { share.account }

        package init(_ budget: MemoryBudget, share: Share) {
            self.budget = budget
            self.share = share
        }

        package convenience init(_ budget: MemoryBudget, account: Account) {
            self.init(budget, share: budget.share(account))
        }

        package convenience init(_ budget: MemoryBudget, uid: UInt32) {
            self.init(budget, account: .uid(uid))
        }

        /// Takes `count` more, or nothing and false.
        package func grow(by count: Int) -> Bool {
            guard budget.reserve(count, for: share) else { return false }
            bytes += count
            return true
        }

        /// Holds `count` from now on: what it held beyond is given back; more is taken if the
        /// budget has it, else the holding stays as it was and false says so.
        package func hold(_ count: Int) -> Bool {
            if count == bytes { return true }
            if count < bytes {
                budget.release(bytes - count, for: share)
                bytes = count
                return true
            }
            return grow(by: count - bytes)
        }

        /// Moves what it holds to `share`, unless that account's share cannot take it.
        package func move(to share: Share) -> Bool {
            guard budget.transfer(bytes, from: self.share, to: share) else { return false }
            self.share = share
            return true
        }

        package func move(to account: Account) -> Bool {
            move(to: budget.share(account))
        }

        /// Gives back all it holds.
        package func releaseAll() {
            budget.release(bytes, for: share)
            bytes = 0
        }

        deinit { budget.release(bytes, for: share) }
    }
}
