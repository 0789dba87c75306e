import Logging
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Who may use the socket: `socket.allowedUsers` and `socket.allowedGroups`, resolved to ids.
///
/// A peer is let in when no list is set, when its uid is listed, or when it is in a listed group:
/// by its primary gid, or as a member in the group database (SO_PEERCRED gives the primary gid
/// only, so supplementary groups are looked up with `getgrouplist`).
package final class AccessPolicy: Sendable {
    package let users: Set<UInt32>
    package let groups: Set<UInt32>
    /// No list: anyone is let in (a TCP listener never has such a policy: `requiresLists`).
    package let isOpen: Bool
    /// Whether a policy without lists lets everyone in (a Unix socket's) or nobody (a TCP listener's).
    private let openAdmits: Bool
    /// A second policy a peer must pass too: a proxy's own lists narrow its provider's readers.
    private let narrowing: AccessPolicy?
    /// Supplementary groups by uid and primary gid (the database's answer for a user depends on
    /// both): NSS lookups can be slow, and a client reconnects often.
    private let memberships = NIOLockedValueBox<[MembershipKey: (groups: Set<UInt32>, at: Double)]>([:])

    private struct MembershipKey: Hashable {
        let uid: UInt32
        let gid: UInt32
    }

    /// Those whom both `base` and `narrowing` let in.
    package init(_ base: AccessPolicy, narrowedBy narrowing: AccessPolicy) {
        users = base.users
        groups = base.groups
        isOpen = base.isOpen && narrowing.isOpen
        openAdmits = base.openAdmits && narrowing.openAdmits
        self.narrowing = narrowing
        // The base's own rule is asked through it, so that its membership cache serves both.
        self.base = base
    }

    /// The policy this one narrows, when it was made by `init(_:narrowedBy:)`.
    private let base: AccessPolicy?

    /// What a policy without lists means: everyone, on a listener a file mode guards; nobody, on
    /// a TCP listener (`tcp`), which nothing else guards: its lists are never empty (TENANT-11),
    /// and if a reload ever left them so, it would refuse everyone rather than admit everyone.
    package init(allowedUsers: [String], allowedGroups: [String], keyPrefix: String = "socket", tcp: Bool = false, logger: Logger) {
        isOpen = allowedUsers.isEmpty && allowedGroups.isEmpty
        openAdmits = !tcp
        narrowing = nil
        base = nil
        users = Set(
            allowedUsers.compactMap { name in
                let id = UInt32(name) ?? Self.userID(named: name)
                if id == nil { logger.warning("\(keyPrefix).allowedUsers: no such user; ignored", metadata: ["user": "\(name)"]) }
                return id
            })
        groups = Set(
            allowedGroups.compactMap { name in
                let id = UInt32(name) ?? Self.groupID(named: name)
                if id == nil { logger.warning("\(keyPrefix).allowedGroups: no such group; ignored", metadata: ["group": "\(name)"]) }
                return id
            })
    }

    /// False without credentials: nobody unknown is let in.
    package func allows(_ peer: PeerCredentials?) -> Bool {
        peer.map(allows) ?? false
    }

    package func allows(_ peer: PeerCredentials) -> Bool {
        if isOpen { return openAdmits }
        if let base, let narrowing { return base.listsAdmit(peer) && narrowing.listsAdmit(peer) }
        return listsAdmit(peer)
    }

    /// Whether this policy's own lists let `peer` in (no list: they do).
    private func listsAdmit(_ peer: PeerCredentials) -> Bool {
        if isOpen || users.contains(peer.uid) || groups.contains(peer.gid) { return true }
        guard !groups.isEmpty else { return false }
        return !supplementaryGroups(of: peer).isDisjoint(with: groups)
    }

    private func supplementaryGroups(of peer: PeerCredentials) -> Set<UInt32> {
        let now = Double(time(nil))
        let key = MembershipKey(uid: peer.uid, gid: peer.gid)
        if let cached = memberships.withLockedValue({ $0[key] }), now - cached.at < 60 { return cached.groups }
        var found: Set<UInt32> = []
        if let name = Self.userName(of: peer.uid) {
            var count: Int32 = 64
            var list = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, peer.gid, &list, &count) == -1 {
                list = [gid_t](repeating: 0, count: Int(count))
                _ = getgrouplist(name, peer.gid, &list, &count)
            }
            found = Set(list.prefix(Int(max(0, count))))
        }
        memberships.withLockedValue { memberships in
            // Entries long expired go when the table grows: one per (uid, gid) that connected.
            if memberships.count > 4096 { memberships = memberships.filter { now - $0.value.at < 60 } }
            memberships[key] = (found, now)
        }
        return found
    }

    // MARK: The user and group databases (NSS), reentrant forms

    package static func userID(named name: String) -> UInt32? {
        withPasswd(name: name) { $0.pw_uid }
    }

    package static func userName(of uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return String(cString: entry.pw_name)
    }

    package static func groupID(named name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 65536)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }

    private static func withPasswd<T>(name: String, _ body: (passwd) -> T) -> T? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return body(entry)
    }
}
