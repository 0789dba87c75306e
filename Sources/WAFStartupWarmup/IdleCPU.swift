#if canImport(Glibc)
import Glibc
#endif

/// The files are read and parsed as bytes: this runs before the warm-up can start (on NIO's last
/// singleton loop, beside the start's first), and the same parse over `String` (its line split, `Character` indices and UTF-8
/// validation, each the first of its kind in the process) took 0.9 ms of a start, by `perf
/// record` over 40 starts, where the warm-up's head start is what it is for.
extension ConformanceWarmup {
    /// Whether a CPU of the host is wanted by nothing else at this instant. At `SCHED_IDLE` the
    /// warm-up gets almost no CPU while every CPU is busy, and if the scheduler stops it inside one
    /// of the runtime's caches, the start waits for that cache until it runs again: with two
    /// programs spinning on the two CPUs here, one start in 30 took 1.2 s instead of 40 ms
    /// (docs/decisions.md, "The start's conformance warm-up"). Load that comes during the
    /// warm-up's few milliseconds can still do that; load already there cannot.
    /// `allowed`: `allowedCPUs()`, read once by the caller.
    static func hostHasIdleCPU(allowed: Int?) -> Bool {
        // Ours counted before and after the host's, the fewer kept: a thread of ours that became
        // runnable in between is not taken off a count that did not hold it.
        let before = runnableThreadsHere()
        guard let loadavg = contents(of: "/proc/loadavg"), let onHost = runnable(fromLoadavg: loadavg), let allowed
        else { return false }
        return idle(runnableOnHost: onHost, runnableHere: min(before, runnableThreadsHere()), online: allowed)
    }

    /// The CPUs this process may run on (its affinity, `taskset`, `CPUAffinity=`, a cpuset), from
    /// `/proc/self/status`: NIO's count reads the cgroup's quota and cpuset, not the affinity, and
    /// sched.h has `sched_getaffinity` under _GNU_SOURCE only. The mask there may hold CPUs that
    /// are possible but not online (a VM's hot-plug slots): no more than those online count.
    package static func allowedCPUs() -> Int? {
        // Read whole: a long Groups: line comes before the mask.
        guard let status = contents(of: "/proc/self/status", limit: 65536),
            let allowed = cpuCount(ofList: value(of: "Cpus_allowed_list:".utf8, in: status) ?? [])
        else { return nil }
        return min(allowed, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    /// The rest of the line that starts with `key`, in a file of "Key: value" lines.
    package static func value(of key: String.UTF8View, in text: [UInt8]) -> ArraySlice<UInt8>? {
        var start = text.startIndex
        while start < text.endIndex {
            let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) ?? text.endIndex
            if text[start..<end].starts(with: key) { return text[(start + key.count)..<end] }
            start = end + 1
        }
        return nil
    }

    /// A CPU list such as "0-3,8,10-11" (cpuset(7)'s list format): 7. Blanks around it are
    /// ignored; anything else that is no digit, ',' or '-' makes it no list.
    package static func cpuCount(ofList list: some BidirectionalCollection<UInt8>) -> Int? {
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") }
        guard let first = list.firstIndex(where: { !isBlank($0) }), let last = list.lastIndex(where: { !isBlank($0) }) else { return nil }
        var count = 0
        for range in list[first...last].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let bounds = range.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).map { decimal($0) }
            guard let low = bounds.first ?? nil, let high = bounds.last ?? nil, bounds.count <= 2, low <= high else { return nil }
            count += high - low + 1
        }
        return count
    }

    /// `/proc/loadavg`'s fourth field, "runnable/total": the host's threads runnable at this
    /// instant, the caller among them.
    package static func runnable(fromLoadavg text: some Collection<UInt8>) -> Int? {
        let fields = text.split(separator: UInt8(ascii: " "))
        guard fields.count >= 5, let slash = fields[3].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        return decimal(fields[3][..<slash])
    }

    private static func decimal(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count < 19 else { return nil }
        var value = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// Other programs' runnable threads on fewer CPUs than this process may use: one is left for
    /// the warm-up whenever the start's threads wait. The start's own runnable threads do not
    /// count: one that waits for the warm-up gives up its CPU to it. The host's count against
    /// this process's CPUs errs towards no warm-up where the process may use only some of them.
    package static func idle(runnableOnHost: Int, runnableHere: Int, online: Int) -> Bool {
        runnableOnHost - runnableHere < online
    }

    /// A thread's state is the field after its name's closing parenthesis in its `stat`.
    package static func isRunnable(stat: some BidirectionalCollection<UInt8>) -> Bool {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return false }
        return stat[stat.index(after: close)...].drop { $0 == UInt8(ascii: " ") }.first == UInt8(ascii: "R")
    }

    package static func runnableThreadsHere() -> Int {
        guard let directory = opendir("/proc/self/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            guard let first = name.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
                let stat = contents(ofPath: Array("/proc/self/task/".utf8) + name + Array("/stat".utf8))
            else { continue }
            if isRunnable(stat: stat) { count += 1 }
        }
        return count
    }

    package static func contents(of path: String, limit: Int = 512) -> [UInt8]? {
        contents(ofPath: Array(path.utf8), limit: limit)
    }

    /// `path` without its terminating zero, which is added here.
    private static func contents(ofPath path: [UInt8], limit: Int = 512) -> [UInt8]? {
        let descriptor = (path + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_RDONLY | O_CLOEXEC) }
        }
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: limit)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return Array(bytes[..<count])
    }
}
