import CLinuxProcess

#if canImport(Glibc)
import Glibc
#endif

/// A signal to the process a pid file names, through a pidfd: the descriptor refers to one
/// process for as long as it is open, so a pid the kernel gave to another process since the pid
/// file was written is never signalled. The process must belong to the daemon's user (or to one
/// of `allowedUsers`, which only a unit granting `CAP_KILL` can reach anyway).
public enum PidfdSignal {
    public static func send(_ signal: Int32, pidFile: String, allowedUsers: Set<UInt32>) throws(DeliveryFailure) {
        let pid = try readPid(pidFile)
        let descriptor = pidfd_open(pid, 0)
        guard descriptor >= 0 else {
            throw DeliveryFailure("no process \(pid) (from \(pidFile)): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        // Whose the process is, read after the descriptor pins it; then a signal 0 through the
        // descriptor proves the process read is still the one pinned (a pid reused in between
        // would belong to a process the descriptor does not refer to, and that one is gone).
        guard let owner = owner(of: pid) else { throw DeliveryFailure("cannot tell whose process \(pid) (from \(pidFile)) is") }
        guard pidfd_send_signal(descriptor, 0, nil, 0) == 0 else {
            throw DeliveryFailure("process \(pid) (from \(pidFile)) is gone")
        }
        guard owner == getuid() || allowedUsers.contains(owner) else {
            throw DeliveryFailure("process \(pid) (from \(pidFile)) belongs to uid \(owner), neither the daemon's nor in sinks.onTokenUsers")
        }
        guard pidfd_send_signal(descriptor, signal, nil, 0) == 0 else {
            throw DeliveryFailure("cannot signal process \(pid) (from \(pidFile)): \(String(cString: strerror(errno)))")
        }
    }

    /// The pid a pid file holds: digits, optionally a newline; at most 64 bytes read.
    static func readPid(_ path: String) throws(DeliveryFailure) -> pid_t {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw DeliveryFailure("cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw DeliveryFailure("\(path) is empty") }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self).trimmingCharacters(" \n\t")
        guard let pid = Int32(text), pid > 1 else { throw DeliveryFailure("\(path) holds no pid") }
        return pid
    }

    /// The real uid of `pid`, from `/proc/PID/status`.
    static func owner(of pid: pid_t) -> UInt32? {
        guard let file = fopen("/proc/\(pid)/status", "r") else { return nil }
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
