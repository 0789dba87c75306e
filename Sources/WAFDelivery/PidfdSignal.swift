import CLinuxProcess

#if canImport(Glibc)
import Glibc
#endif

/// A signal to the process a pid file names, through a pidfd: the descriptor refers to one
/// process for as long as it is open, so a pid the kernel gave to another process meanwhile is
/// never signalled. The pid file is a claim by whoever wrote it, so it is believed only as far as
/// its writer could sign it: the process must belong to the daemon's user (or to one of
/// `allowedUsers`, which only a unit granting `CAP_KILL` can reach anyway), the file must belong to
/// root, the daemon's user or the process's own user (an app's uid cannot point the daemon at
/// another user's process, nor at the daemon itself), and the process must be older than the file
/// (a stale file whose pid was reused names a younger process).
public enum PidfdSignal {
    public static func send(_ signal: Int32, pidFile: String, allowedUsers: Set<UInt32>) throws(DeliveryFailure) {
        let file = try read(pidFile)
        let pid = file.pid
        guard pid != getpid() else { throw DeliveryFailure("\(pidFile) names the daemon itself") }
        let descriptor = pidfd_open(pid, 0)
        guard descriptor >= 0 else {
            throw DeliveryFailure("no process \(pid) (from \(pidFile)): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        // Whose the process is and when it started, read after the descriptor pins it; then a
        // signal 0 through the descriptor proves the process read is still the one pinned (a pid
        // reused in between would belong to a process the descriptor does not refer to).
        guard let owner = owner(of: pid), let started = startTime(of: pid) else {
            throw DeliveryFailure("cannot tell whose process \(pid) (from \(pidFile)) is")
        }
        guard pidfd_send_signal(descriptor, 0, nil, 0) == 0 else {
            throw DeliveryFailure("process \(pid) (from \(pidFile)) is gone")
        }
        guard owner == getuid() || allowedUsers.contains(owner) else {
            throw DeliveryFailure("process \(pid) (from \(pidFile)) belongs to uid \(owner), neither the daemon's nor in sinks.onTokenUsers")
        }
        guard file.owner == 0 || file.owner == getuid() || file.owner == owner else {
            throw DeliveryFailure("\(pidFile) belongs to uid \(file.owner), which may not name a process of uid \(owner)")
        }
        // The directories on its path obey the file's rule: another user's directory could hold
        // any file it likes under the name (HOOK-8).
        if let directory = file.directories.first(where: { $0.owner != 0 && $0.owner != getuid() && $0.owner != owner }) {
            throw DeliveryFailure("\(directory.path) belongs to uid \(directory.owner), which may not name a process of uid \(owner)")
        }
        // A file others may write is anyone's claim.
        guard !file.writableByOthers else { throw DeliveryFailure("\(pidFile) is writable by its group or others") }
        // A file in memory (tmpfs, as /run) cannot outlive a boot: a time before this boot says
        // the clock was stepped since (a machine without a clock of its own), and the owner checks
        // above stand alone. On a disk it is a file left from an earlier boot, whose pid is anyone's.
        if file.modified < bootTime() {
            guard file.inMemory else {
                throw DeliveryFailure("\(pidFile) was written before this boot: a stale pid file, not the process it named")
            }
        } else if started > file.modified + 2 {
            // Two seconds of slack: the start time is read in clock ticks, the file's time in seconds.
            throw DeliveryFailure("process \(pid) started after \(pidFile) was written: a reused pid, not the process it names")
        }
        guard pidfd_send_signal(descriptor, signal, nil, 0) == 0 else {
            throw DeliveryFailure("cannot signal process \(pid) (from \(pidFile)): \(String(cString: strerror(errno)))")
        }
    }

    struct PidFile {
        let pid: pid_t
        let owner: UInt32
        /// The directories on its path, each with its owner, `/` first.
        let directories: [(path: String, owner: UInt32)]
        /// When it was last written, in seconds since the epoch.
        let modified: Int
        let writableByOthers: Bool
        /// On tmpfs or ramfs, which a boot starts empty.
        let inMemory: Bool
    }

    /// The pid a pid file holds (digits, optionally a newline; at most 64 bytes read), whose the
    /// file is and when it was written. Opened one component at a time from `/`, none a link
    /// (HOOK-8): a link anywhere on the path, which whoever owns a directory could put in the place
    /// of the next one, would make the file another's choice. A regular file only: a FIFO put in
    /// its place would block the read (O_NONBLOCK keeps the open from blocking, the check refuses it).
    static func read(_ path: String) throws(DeliveryFailure) -> PidFile {
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard path.hasPrefix("/"), let name = components.last, !components.contains(".."), !components.contains(".") else {
            throw DeliveryFailure("\(path) is not an absolute path without . or ..")
        }
        var directories: [(path: String, owner: UInt32)] = []
        var current = open("/", WAF_O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw DeliveryFailure("cannot open /: \(String(cString: strerror(errno)))") }
        defer { close(current) }
        var walked = ""
        for component in components.dropLast() + [nil] {
            // The directory `current` is: its owner, and whether others may replace what is in it
            // (writable by them without the sticky bit).
            let here = walked.isEmpty ? "/" : walked
            var info = stat()
            guard fstat(current, &info) == 0 else { throw DeliveryFailure("cannot read \(here): \(String(cString: strerror(errno)))") }
            directories.append((here, info.st_uid))
            if info.st_mode & 0o002 != 0, info.st_mode & S_ISVTX == 0 {
                throw DeliveryFailure("\(here) is writable by others: anyone may put a file of theirs in it")
            }
            guard let component else { break }
            walked += "/" + component
            let next = openat(current, component, WAF_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { throw DeliveryFailure(linkOr(errno, walked)) }
            close(current)
            current = next
        }
        let descriptor = openat(current, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else { throw DeliveryFailure(linkOr(errno, path)) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { throw DeliveryFailure("\(path) is not a regular file") }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw DeliveryFailure("\(path) is empty") }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self).trimmingCharacters(" \n\t")
        guard let pid = Int32(text), pid > 1 else { throw DeliveryFailure("\(path) holds no pid") }
        return PidFile(
            pid: pid, owner: info.st_uid, directories: directories, modified: info.st_mtim.tv_sec, writableByOthers: info.st_mode & 0o022 != 0,
            inMemory: inMemory(descriptor))
    }

    /// Why a component could not be opened: a link (ELOOP, or ENOTDIR for a link in a
    /// directory's place) said as one.
    private static func linkOr(_ error: Int32, _ path: String) -> String {
        if error == ELOOP || error == ENOTDIR {
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
                return "\(path) is a symbolic link: a pid file's path is followed without links"
            }
        }
        return "cannot read \(path): \(String(cString: strerror(error)))"
    }

    /// Whether the open file is on tmpfs or ramfs, which a boot starts empty.
    static func inMemory(_ descriptor: CInt) -> Bool {
        var system = statfs()
        guard fstatfs(descriptor, &system) == 0 else { return false }
        return [Int(TMPFS_MAGIC), Int(RAMFS_MAGIC)].contains(Int(system.f_type))
    }

    /// When `pid` started, in seconds since the epoch: its start in clock ticks after boot
    /// (`/proc/PID/stat`, field 22, on the boot-time clock) gives its age, taken from now.
    static func startTime(of pid: pid_t) -> Int? {
        guard let stat = contents("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces and parentheses): state is field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Int(fields[19]) else { return nil }
        var boot = timespec(), wall = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &boot) == 0, clock_gettime(CLOCK_REALTIME, &wall) == 0 else { return nil }
        let age = boot.tv_sec - ticks / max(sysconf(Int32(_SC_CLK_TCK)), 1)
        return wall.tv_sec - age
    }

    /// When this boot began, in seconds since the epoch, by today's wall clock.
    static func bootTime() -> Int {
        var boot = timespec(), wall = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &boot) == 0, clock_gettime(CLOCK_REALTIME, &wall) == 0 else { return 0 }
        return wall.tv_sec - boot.tv_sec
    }

    private static func contents(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: bytes.prefix(count), as: UTF8.self) : nil
    }

    /// The real uid of `pid`, from `/proc/PID/status`.
    static func owner(of pid: pid_t) -> UInt32? {
        guard let file = fopen("/proc/\(pid)/status", "re") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("Uid:") else { continue }
            return text.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { UInt32($0) }
        }
        return nil
    }
}

extension String {
    func trimmingCharacters(_ set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
