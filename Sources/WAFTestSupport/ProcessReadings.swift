import Foundation
import NIOConcurrencyHelpers

/// What /proc says about a process: resident memory, descriptors, CPU time, its threads.
public enum ProcessReadings {
    /// Resident set size in KiB, nil when the process is gone.
    public static func residentKiB(_ pid: Int32) -> Int? {
        guard let status = procFile("/proc/\(pid)/status") else { return nil }
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return line.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") }
    }

    /// Each thread's `/proc/PID/task/TID/status` as "key: value" lines, by thread id; a thread
    /// that ended meanwhile is left out.
    public static func threadStatuses(_ pid: Int32) -> [(tid: String, lines: [Substring])] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { tid in
            guard let status = procFile("/proc/\(pid)/task/\(tid)/status") else { return nil }
            return (tid, status.split(separator: "\n"))
        }
    }

    /// No signal pending for the process or any of its threads (`ShdPnd` and `SigPnd` all zero).
    public static func nothingPending(_ pid: Int32) -> Bool {
        threadStatuses(pid).allSatisfy { _, lines in
            lines.allSatisfy { line in
                !(line.hasPrefix("ShdPnd:") || line.hasPrefix("SigPnd:"))
                    || line.split(separator: "\t").last.map { $0.allSatisfy { $0 == "0" } } == true
            }
        }
    }

    public static func openDescriptors(_ pid: Int32) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// CPU time used so far (user and system, every thread), from /proc/PID/stat.
    public static func cpuTime(_ pid: Int32) -> Duration? {
        guard let stat = procFile("/proc/\(pid)/stat"),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        let ticks = sysconf(Int32(_SC_CLK_TCK))
        return .milliseconds((user + system) * 1000 / max(ticks, 1))
    }

    /// The share of one core `pid` used over `interval` of real time.
    public static func coreShare(_ pid: Int32, over interval: Duration) async throws -> Double {
        let clock = ContinuousClock()
        guard let before = cpuTime(pid) else { return .nan }
        let started = clock.now
        try await Task.sleep(for: interval)
        guard let after = cpuTime(pid) else { return .nan }
        return (after - before) / (clock.now - started)
    }
}

/// A memory cgroup with a limit, as systemd's `MemoryMax=` makes one: cgroup v2 where the host
/// has it unified, else the v1 memory controller. Processes moved in are killed by the kernel if
/// they pass the limit, which is what the reliability tests must never see.
public final class MemoryLimit: @unchecked Sendable {
    public let path: String
    private let unified: Bool

    /// The limit of the shipped unit's `MemoryMax=`, in bytes.
    public static func shippedUnitLimit() throws -> Int {
        let unit = try String(contentsOf: repositoryDirectory.appendingPathComponent("systemd/waf-tokend.service"), encoding: .utf8)
        guard let line = unit.split(separator: "\n").first(where: { $0.hasPrefix("MemoryMax=") }) else { throw Missing() }
        let value = line.dropFirst("MemoryMax=".count)
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        guard let last = value.last, let scale = units[last], let number = Int(value.dropLast()) else { throw Missing() }
        return number * scale
    }

    struct Missing: Error {}

    public init(bytes: Int) throws {
        unified = FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers")
        let root = unified ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory"
        path = "\(root)/waf-reliability-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try String(bytes).write(toFile: "\(path)/\(unified ? "memory.max" : "memory.limit_in_bytes")", atomically: false, encoding: .utf8)
    }

    /// A program that starts `executable` (a name in the build's products, or a path) inside the
    /// group, as systemd starts a unit with `MemoryMax=`: everything the process ever touches,
    /// its start included, is charged to the group, not only what it touches after a move.
    public func starting(_ executable: String) throws -> String {
        let program = executable.hasPrefix("/") ? executable : productsDirectory.appendingPathComponent(executable).path
        let wrapper =
            "\(NSTemporaryDirectory())/waf-in-\(URL(fileURLWithPath: path).lastPathComponent)-\(URL(fileURLWithPath: program).lastPathComponent)"
        try "#!/bin/sh\necho $$ > \(path)/cgroup.procs || exit 70\nexec \(program) \"$@\"\n".write(toFile: wrapper, atomically: true, encoding: .utf8)
        chmod(wrapper, 0o755)
        wrappers.withLockedValue { $0.append(wrapper) }
        return wrapper
    }

    private let wrappers = NIOLockedValueBox<[String]>([])

    public func add(_ pid: Int32) throws {
        try String(pid).write(toFile: "\(path)/cgroup.procs", atomically: false, encoding: .utf8)
    }

    /// How often the kernel killed a process of the group for memory.
    public var oomKills: Int {
        let file = unified ? "memory.events" : "memory.oom_control"
        let text = procFile("\(path)/\(file)") ?? ""
        return text.split(separator: "\n").first { $0.hasPrefix("oom_kill ") }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    /// How often the group's use reached its limit, which makes the kernel reclaim and, failing
    /// that, kill (v1 `memory.failcnt`, v2 `memory.events` `max`): a daemon that never nears its
    /// limit leaves it at 0.
    public var limitReached: Int {
        if unified {
            let text = procFile("\(path)/memory.events") ?? ""
            return text.split(separator: "\n").first { $0.hasPrefix("max ") }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        return procFile("\(path)/memory.failcnt").flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
    }

    /// The most the group used, in bytes (v1 only keeps it; v2 from 5.19 on).
    public var peakBytes: Int? {
        let file = unified ? "memory.peak" : "memory.max_usage_in_bytes"
        return procFile("\(path)/\(file)").flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    deinit {
        for wrapper in wrappers.withLockedValue({ $0 }) { unlink(wrapper) }
        rmdir(path)
    }
}

/// Latencies of sequential `GET /v1/token` requests on one kept-alive connection, in seconds.
public func probeLatencies(socket path: String, count: Int) -> [Double] {
    guard let socket = try? RawSocket(path: path) else { return [] }
    var latencies: [Double] = []
    let clock = ContinuousClock()
    for _ in 0..<count {
        let started = clock.now
        socket.send("GET /v1/token HTTP/1.1\r\nHost: localhost\r\n\r\n")
        guard socket.nextResponse(timeout: .seconds(5))?.status == 200 else { break }
        let elapsed = clock.now - started
        latencies.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
    return latencies
}

/// The `fraction` quantile of `values` (0.99: p99).
public func quantile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return .infinity }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}
