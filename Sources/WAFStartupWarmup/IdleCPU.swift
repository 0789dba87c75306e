#if canImport(Glibc)
import Glibc
#endif

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
        guard let status = contents(of: "/proc/self/status", limit: 65536) else { return nil }
        let prefix = "Cpus_allowed_list:"
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
            let allowed = cpuCount(ofList: line.dropFirst(prefix.count))
        else { return nil }
        return min(allowed, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    /// A CPU list such as "0-3,8,10-11" (cpuset(7)'s list format): 7.
    package static func cpuCount(ofList list: some StringProtocol) -> Int? {
        var count = 0
        for range in list.split(separator: ",") {
            let bounds = range.split(separator: "-").map { Int(String($0.filter { !$0.isWhitespace })) }
            switch bounds.count {
            case 1:
                guard bounds[0] != nil else { return nil }
                count += 1
            case 2:
                guard let low = bounds[0], let high = bounds[1], low <= high else { return nil }
                count += high - low + 1
            default: return nil
            }
        }
        return count > 0 ? count : nil
    }

    /// `/proc/loadavg`'s fourth field, "runnable/total": the host's threads runnable at this
    /// instant, the caller among them.
    package static func runnable(fromLoadavg text: some StringProtocol) -> Int? {
        let fields = text.split(separator: " ")
        guard fields.count >= 5, let slash = fields[3].firstIndex(of: "/") else { return nil }
        return Int(fields[3][..<slash])
    }

    /// Other programs' runnable threads on fewer CPUs than this process may use: one is left for
    /// the warm-up whenever the start's threads wait. The start's own runnable threads do not
    /// count: one that waits for the warm-up gives up its CPU to it. The host's count against
    /// this process's CPUs errs towards no warm-up where the process may use only some of them.
    package static func idle(runnableOnHost: Int, runnableHere: Int, online: Int) -> Bool {
        runnableOnHost - runnableHere < online
    }

    /// A thread's state is the field after its name's closing parenthesis in its `stat`.
    package static func isRunnable(stat: some StringProtocol) -> Bool {
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].drop { $0 == " " }.first == "R"
    }

    package static func runnableThreadsHere() -> Int {
        guard let directory = opendir("/proc/self/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.first?.isNumber == true, let stat = contents(of: "/proc/self/task/\(name)/stat") else { continue }
            if isRunnable(stat: stat) { count += 1 }
        }
        return count
    }

    package static func contents(of path: String, limit: Int = 512) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: limit)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}
