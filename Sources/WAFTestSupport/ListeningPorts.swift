import Foundation

/// The TCP ports a process listens on, read from `/proc`: its sockets' inodes
/// (`/proc/PID/fd`), matched against the kernel's tables of listening sockets. For a program a
/// test starts on port 0 (Prometheus, Caddy, Traefik) and that does not say which port it got.
public func listeningPorts(of pid: Int32) -> Set<Int> {
    let directory = "/proc/\(pid)/fd"
    let inodes = Set(
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap { entry -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(entry)"),
                target.hasPrefix("socket:[")
            else { return nil }
            return String(target.dropFirst("socket:[".count).dropLast())
        })
    var ports: Set<Int> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        guard let text = procFile(table) else { continue }
        for line in text.split(separator: "\n").dropFirst() {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[3] == "0A", inodes.contains(String(fields[9])),
                let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) })
            else { continue }
            ports.insert(port)
        }
    }
    return ports
}

/// The one TCP port `pid` listens on, once it listens on exactly one (within `timeout`: a Go
/// program such as Traefik takes many seconds to start on a machine the rest of the suite
/// loads); nil when it listens on none, or on several, by then.
public func listeningPort(of pid: Int32, timeout: Duration = .seconds(60)) async -> Int? {
    let deadline = ContinuousClock.now + timeout
    repeat {
        let ports = listeningPorts(of: pid)
        if ports.count == 1 { return ports.first }
        try? await Task.sleep(for: .milliseconds(50))
    } while ContinuousClock.now < deadline
    return nil
}
