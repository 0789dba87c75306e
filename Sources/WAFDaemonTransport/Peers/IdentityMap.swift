#if canImport(Glibc)
import Glibc
#endif

/// Which user and group ids the daemon can tell apart: those its user namespace maps
/// (`/proc/self/uid_map`, `gid_map`). Under systemd's `PrivateUsers=yes` it maps root and the
/// daemon's own user only, and every other peer reads as `nobody` through `SO_PEERCRED` and the
/// socket diagnostics: an allow-list that names another user would then mean nothing, silently.
/// The daemon refuses such a configuration instead (TENANT-14).
package struct IdentityMap: Sendable, Equatable {
    /// Ranges of ids inside the namespace.
    package let users: [ClosedRange<UInt32>]
    package let groups: [ClosedRange<UInt32>]

    /// The maps of this process, or the identity (everything) where they cannot be read.
    package static func current() -> IdentityMap {
        IdentityMap(uidMap: read("/proc/self/uid_map"), gidMap: read("/proc/self/gid_map"))
    }

    /// From the text of `uid_map` and `gid_map` ("inside outside count" per line); nil or empty
    /// text: everything is mapped.
    package init(uidMap: String?, gidMap: String?) {
        users = Self.ranges(uidMap)
        groups = Self.ranges(gidMap)
    }

    package func maps(uid: UInt32) -> Bool { users.contains { $0.contains(uid) } }
    package func maps(gid: UInt32) -> Bool { groups.contains { $0.contains(gid) } }

    /// Whether every id is mapped as it is (no user namespace of the daemon's own).
    package var isIdentity: Bool { users == [0...UInt32.max - 1] && groups == [0...UInt32.max - 1] }

    private static func ranges(_ text: String?) -> [ClosedRange<UInt32>] {
        guard let text, !text.isEmpty else { return [0...UInt32.max - 1] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 3, let inside = UInt32(fields[0]), let count = UInt64(fields[2]), count > 0 else { return nil }
            return inside...UInt32(min(UInt64(inside) + count - 1, UInt64(UInt32.max - 1)))
        }
    }

    private static func read(_ path: String) -> String? {
        guard let file = fopen(path, "re") else { return nil }
        defer { fclose(file) }
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            guard count > 0 else { break }
            text += String(decoding: buffer.prefix(count), as: UTF8.self)
        }
        return text
    }

    /// The names and ids of `users` and `groups` (as lists write them) that this map cannot tell
    /// apart from `nobody`, each with its key; names that do not resolve are left to the lists'
    /// own warning.
    package func unmapped(users: [String], groups: [String]) -> [String] {
        let badUsers = users.filter { name in
            guard let uid = UInt32(name) ?? AccessPolicy.userID(named: name) else { return false }
            return !maps(uid: uid)
        }
        let badGroups = groups.filter { name in
            guard let gid = UInt32(name) ?? AccessPolicy.groupID(named: name) else { return false }
            return !maps(gid: gid)
        }
        return badUsers.map { "user \($0)" } + badGroups.map { "group \($0)" }
    }
}
