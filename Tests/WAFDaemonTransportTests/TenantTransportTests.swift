import Logging
import NIOCore
import Testing
import WAFTestTraits

@testable import WAFDaemonTransport

/// The transport's share of keeping tenants apart: lists that narrow and never widen, TCP
/// listeners that never stand open, unknown owners, who counts toward the limits, and the memory
/// budget (TENANT-10, TENANT-11, TENANT-12, TENANT-14).
@Suite("Tenants in the transport", .offPool)
struct TenantTransportTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func peer(_ uid: UInt32, _ gid: UInt32) -> PeerCredentials { PeerCredentials(pid: 1, uid: uid, gid: gid) }

    @Test("TENANT10: a proxy's lists narrow its provider's readers and never widen them")
    func TENANT10_narrowingNeverWidens() {
        let readers = AccessPolicy(allowedUsers: ["4000"], allowedGroups: [], logger: Self.quiet)
        let proxy = AccessPolicy(allowedUsers: [], allowedGroups: ["4242"], logger: Self.quiet)
        let policy = AccessPolicy(readers, narrowedBy: proxy)
        #expect(!policy.allows(Self.peer(5000, 4242)), "in the proxy's group, but not a reader")
        #expect(policy.allows(Self.peer(4000, 4242)), "a reader the proxy's lists let in")
        #expect(!policy.allows(Self.peer(4000, 4300)), "a reader the proxy's lists leave out")
        let open = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: Self.quiet)
        #expect(AccessPolicy(open, narrowedBy: proxy).allows(Self.peer(5000, 4242)), "readers without lists: the proxy's decide")
        #expect(AccessPolicy(readers, narrowedBy: open).allows(Self.peer(4000, 1)), "an empty pair narrows nothing")
        #expect(!AccessPolicy(readers, narrowedBy: open).allows(Self.peer(5000, 1)))
    }

    @Test("TENANT11: a TCP listener's policy without lists refuses everyone; a Unix socket's admits everyone")
    func TENANT11_tcpPolicyNeverOpen() {
        let tcp = AccessPolicy(allowedUsers: [], allowedGroups: [], tcp: true, logger: Self.quiet)
        #expect(!tcp.allows(Self.peer(0, 0)) && !tcp.allows(Self.peer(1000, 1000)))
        let unix = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: Self.quiet)
        #expect(unix.allows(Self.peer(1000, 1000)))
        let listed = AccessPolicy(allowedUsers: ["0"], allowedGroups: [], tcp: true, logger: Self.quiet)
        #expect(listed.allows(Self.peer(0, 0)) && !listed.allows(Self.peer(1000, 1000)))
    }

    @Test("TENANT11: a peer whose owner is unknown is refused on its first request and every later one, whatever the lists")
    func TENANT11_unknownOwner() {
        let open = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: Self.quiet)
        let connection = ConnectionState()
        connection.identified(as: nil, allowed: true)
        #expect(!connection.allowed)
        for generation in [0, 1, 7] as [UInt64] { #expect(!connection.allowed(under: open, generation: generation)) }
        let known = ConnectionState()
        known.identified(as: Self.peer(1000, 1000), allowed: true)
        #expect(known.allowed(under: open, generation: 1))
    }

    @Test("TENANT12: a refused peer takes no place of an admitted one; peers on the network count by address")
    func TENANT12_whoCounts() {
        let limits = ListenerLimits()
        let settings = ConnectionSettings(
            policy: AccessPolicy(allowedUsers: [], allowedGroups: [], logger: Self.quiet), idleTimeout: .seconds(60), requestTimeout: .seconds(10),
            maxConnections: 2, maxConnectionsPerUser: 2)
        #expect(limits.admit(.uid(65534), allowed: false, settings: settings) == .admitted)
        #expect(limits.admit(.uid(65534), allowed: false, settings: settings) == .admitted)
        #expect(limits.admit(.uid(65534), allowed: false, settings: settings) == .listenerFull, "the refused have limits of their own")
        #expect(limits.admit(.uid(1000), allowed: true, settings: settings) == .admitted, "and take no place of the admitted")
        #expect(limits.admit(.uid(1001), allowed: true, settings: settings) == .admitted)
        #expect(limits.openConnections == 2)
        limits.release(.uid(65534), allowed: false)
        #expect(limits.openConnections == 2)
        let network = ListenerLimits()
        let one = ConnectionSettings(
            policy: settings.policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10), maxConnections: 10, maxConnectionsPerUser: 1)
        #expect(network.admit(.address("10.0.0.1"), allowed: true, settings: one) == .admitted)
        #expect(network.admit(.address("10.0.0.1"), allowed: true, settings: one) == .userFull)
        #expect(network.admit(.address("10.0.0.2"), allowed: true, settings: one) == .admitted, "another address, another bucket")
    }

    @Test("TENANT12: the memory budget: the daemon's total, a quarter per account, given back when a holding goes, moved between accounts")
    func TENANT12_budget() {
        let budget = MemoryBudget(total: 100)
        #expect(budget.perAccount == 25)
        #expect(budget.reserve(25, for: .uid(1)) && !budget.reserve(1, for: .uid(1)), "one uid's share")
        #expect(budget.reserve(25, for: .uid(2)) && budget.reserve(25, for: .uid(3)) && budget.reserve(20, for: .uid(4)))
        #expect(!budget.reserve(10, for: .uid(5)), "the daemon's total")
        budget.release(25, for: .uid(1))
        #expect(budget.used == 70 && budget.used(by: 1) == 0)
        do {
            let holding = MemoryBudget.Holding(budget, uid: 6)
            #expect(holding.grow(by: 20) && !holding.grow(by: 10))
            #expect(budget.used(by: 6) == 20)
            #expect(holding.hold(5) && budget.used(by: 6) == 5, "holding less gives the rest back")
            #expect(!holding.hold(30) && budget.used(by: 6) == 5, "more than the share: nothing changes")
            #expect(holding.move(to: .pool) && budget.used(by: .pool) == 5 && budget.used(by: 6) == 0, "to the idle pool's account")
            #expect(budget.reserve(20, for: .pool))
            #expect(!holding.move(to: .pool) || holding.account == .pool, "a move that would pass the share is refused")
            #expect(budget.used == 95)
            budget.release(20, for: .pool)
        }
        #expect(budget.used(by: .pool) == 0 && budget.used == 70, "a holding gives back what it held when it goes, to the account that holds it")
    }

    @Test("TENANT14: ids a user namespace does not map (PrivateUsers=yes) are found in the lists that name them")
    func TENANT14_identityMap() {
        let identity = IdentityMap(uidMap: "         0          0 4294967295\n", gidMap: "         0          0 4294967295\n")
        #expect(identity.isIdentity && identity.unmapped(users: ["1000"], groups: ["4242"]).isEmpty)
        let privateUsers = IdentityMap(uidMap: "0 0 1\n998 998 1\n", gidMap: "0 0 1\n997 997 1\n")
        #expect(!privateUsers.isIdentity)
        #expect(privateUsers.unmapped(users: ["0", "998", "1000", "no-such-user-here"], groups: ["997", "4242"]) == ["user 1000", "group 4242"])
        #expect(privateUsers.unmapped(users: ["root"], groups: []).isEmpty, "root is mapped")
    }

    @Test(
        "TENANT10: a listed primary group lets a peer in; membership beyond it comes from the group database"
    )
    func TENANT10_membershipByUidAndGid() {
        let policy = AccessPolicy(allowedUsers: [], allowedGroups: ["4242"], logger: Self.quiet)
        #expect(policy.allows(Self.peer(65534, 4242)), "its primary group is listed")
        #expect(!policy.allows(Self.peer(65534, 65534)), "nobody is no member of 4242 in the group database")
    }
}
