import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension Spawned {
    /// Ends the group of every child not yet reaped (SIGTERM, SIGKILL after each one's stop grace
    /// to what still runs), without reaping, then runs `last`: for a process that exits once `last`
    /// returns (a library it loads on first use is missing), whose children must not outlive it
    /// (HOOK-7, EXEC-5). Holds the list throughout, and `last` should not return: no pid is reaped
    /// (and given to another process) while it is signalled, no child starts meanwhile, and no
    /// waiter reports a child's end (which would begin a stop with another status). The list is
    /// waited for `within` at most: a spawn holds it until its child has called exec, which a
    /// program on a hung mount never finishes. Then the groups of the list as it was before that
    /// spawn end, and `last` runs, under the hold of that copy: should the spawn finish meanwhile,
    /// it stops in `Children.change` still holding the list, so that no pid is reaped. No spawn
    /// starts a child once this has begun (`ending`); the one child it cannot reach is that of
    /// the spawn that hung, should its exec finish in the end.
    public static func endEveryGroup(within wait: Duration, last: () -> Never) -> Never {
        Children.ending.store(true, ordering: .releasing)
        _ = Children.unreaped.withLock(within: wait) { children -> Never in
            Children.endGroups(children)
            last()
        }
        _ = Children.lastReleased.withLock(within: .seconds(1)) { children -> Never in
            Children.endGroups(children)
            last()
        }
        last()
    }
}

/// The children `Spawned` started and has not reaped, for `Spawned.endEveryGroup`.
enum Children {
    /// The children not yet reaped, with the grace each group has after SIGTERM, whose groups
    /// `endEveryGroup` ends. A pid leaves it before it is reaped, so that every pid here is still
    /// its child's (and its group's id).
    static let unreaped = TimedLock<[pid_t: Duration]>([:])
    /// `unreaped` as it was when last let go, for `endEveryGroup` when a spawn holds the list too
    /// long: no pid in it has been reaped since, as reaping first takes the pid out of the list.
    static let lastReleased = TimedLock<[pid_t: Duration]>([:])
    /// Set when `endEveryGroup` begins: no spawn starts a child after it.
    static let ending = Atomic<Bool>(false)

    /// Changes the list of children, and its copy.
    static func change<Result>(_ body: (inout [pid_t: Duration]) -> Result) -> Result {
        unreaped.withLock { list in
            let result = body(&list)
            lastReleased.withLock { [list] in $0 = list }
            return result
        }
    }

    /// SIGTERM (and SIGCONT) to every group, then SIGKILL to each that still runs after its grace;
    /// done when none runs, or 2 s after a group's SIGKILL (the kernel's to finish then).
    static func endGroups(_ children: [pid_t: Duration]) {
        for pid in children.keys {
            _ = Glibc.kill(-pid, SIGTERM)
            _ = Glibc.kill(-pid, SIGCONT)
        }
        let clock = ContinuousClock()
        let start = clock.now
        var running = children
        var killed: [pid_t: ContinuousClock.Instant] = [:]
        while true {
            let now = clock.now
            running = running.filter { pid, _ in !ProcessGroup.live(pid).isEmpty && killed[pid].map { now < $0 + .seconds(2) } ?? true }
            for (pid, grace) in running where killed[pid] != nil || now >= start + grace {
                // Again on each pass: a member forking as the first one came may leave a child.
                _ = Glibc.kill(-pid, SIGKILL)
                if killed[pid] == nil { killed[pid] = now }
            }
            if running.isEmpty { return }
            usleep(10_000)
        }
    }
}

/// The processes of a process group, read from `/proc`.
enum ProcessGroup {
    /// The pids of the members of group `id` that are alive (not zombies).
    static func live(_ id: pid_t) -> [pid_t] {
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var members: [pid_t] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name), let (state, group) = stat(of: pid), group == id, state != "Z", state != "X" else { continue }
            members.append(pid)
        }
        return members
    }

    /// A process's state letter and its process group, from `/proc/PID/stat`.
    private static func stat(of pid: pid_t) -> (Character, pid_t)? {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self)
        // After the command's name (which may hold spaces and parentheses): state, ppid, pgrp.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let state = fields[0].first, let group = pid_t(fields[2]) else { return nil }
        return (state, group)
    }
}
