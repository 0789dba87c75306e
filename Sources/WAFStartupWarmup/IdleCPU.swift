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
    static func hostHasIdleCPU() -> Bool {
        guard let loadavg = contents(of: "/proc/loadavg"), let onHost = runnable(fromLoadavg: loadavg) else { return false }
        return idle(runnableOnHost: onHost, runnableHere: runnableThreadsHere(), online: sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    /// `/proc/loadavg`'s fourth field, "runnable/total": the host's threads runnable at this
    /// instant, the caller among them.
    package static func runnable(fromLoadavg text: some StringProtocol) -> Int? {
        let fields = text.split(separator: " ")
        guard fields.count >= 5, let slash = fields[3].firstIndex(of: "/") else { return nil }
        return Int(fields[3][..<slash])
    }

    /// Other programs' runnable threads on fewer CPUs than there are: one is left for the
    /// warm-up whenever the start's threads wait. The start's own runnable threads do not count:
    /// one that waits for the warm-up gives up its CPU to it.
    package static func idle(runnableOnHost: Int, runnableHere: Int, online: Int) -> Bool {
        runnableOnHost - runnableHere < online
    }

    /// A thread's state is the field after its name's closing parenthesis in its `stat`.
    package static func isRunnable(stat: some StringProtocol) -> Bool {
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].drop { $0 == " " }.first == "R"
    }

    private static func runnableThreadsHere() -> Int {
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

    private static func contents(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}
