import Foundation
import Synchronization
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// A real squid from Debian (`scripts/install-deps.sh` installs it): the forward proxy of the
/// egress tests (EGRESS-1), whose access log says what went through it, from which address.
///
/// squid takes neither port 0 nor a socket it is handed, so it cannot report a port the system
/// chose. It listens instead where nothing else of the run can be: a loopback address of its own
/// (127.A.B.1, from the test process's pid and a count) and a port below the kernel's ephemeral
/// range, which no bind to port 0 and no outgoing connection is ever given. Should squid still
/// find the port taken (a program bound to it on purpose), its cache.log says so and another
/// port is tried.
public final class Squid: Sendable {
    public struct Options: Sendable {
        /// `user:password` squid asks for (a 407 without it); nil: no authentication.
        public var credentials: (user: String, password: String)?
        /// The address squid's own connections leave from: a second egress on one host.
        public var outgoingAddress: String
        /// Names squid resolves, to 127.0.0.1 (its hosts file has nothing else).
        public var names: [String]
        /// Ports squid refuses to reach (403), as a proxy's ACL does.
        public var refusedPorts: [Int]

        public init(
            credentials: (user: String, password: String)? = nil, outgoingAddress: String = "127.0.0.2", names: [String] = ["localhost"],
            refusedPorts: [Int] = []
        ) {
            self.credentials = credentials
            self.outgoingAddress = outgoingAddress
            self.names = names
            self.refusedPorts = refusedPorts
        }
    }

    /// One line of the access log: a request squid forwarded or refused.
    public struct Entry: Sendable, Equatable, CustomStringConvertible {
        /// `CONNECT`, or an absolute-form request's method.
        public let method: String
        /// `host:port` of a `CONNECT`, or the absolute URL.
        public let target: String
        public let status: Int
        /// The authenticated user, nil when none.
        public let user: String?
        /// The address squid's connection to the target left from (nil: none made).
        public let outgoing: String?

        public var description: String { "\(method) \(target) \(status) \(user ?? "-") \(outgoing ?? "-")" }
    }

    public let host: String
    public let port: Int
    private let directory: URL
    private let child: SpawnedProcess
    private static let count = Atomic<Int>(0)

    /// `http://HOST:PORT`, for `egress.proxy` or `HTTPS_PROXY`.
    public var url: String { "http://\(host):\(port)" }
    /// What the metrics' `egress` label says of it.
    public var label: String { "\(host):\(port)" }

    public init(_ options: Options = Options()) async throws {
        let squid = "/usr/sbin/squid"
        guard FileManager.default.isExecutableFile(atPath: squid) else {
            throw SquidFailure("no \(squid): make test installs squid (scripts/install-deps.sh)")
        }
        let index = Self.count.wrappingAdd(1, ordering: .relaxed).newValue
        host = "127.\(100 + Int(getpid()) % 100).\(index % 250 + 1).1"
        directory = try scratchDirectory("squid")
        // squid drops to the `proxy` user: its files must be reachable by it.
        chmod(directory.path, 0o777)
        let lowest = Self.ephemeralRangeStart()
        var lastWords = ""
        for _ in 0..<5 {
            let port = Int.random(in: (lowest - 12_000)..<(lowest - 2_000))
            try await Self.configuration(options, host: host, port: port, in: directory)
                .write(to: directory.appendingPathComponent("squid.conf"), atomically: true, encoding: .utf8)
            let child = try SpawnedProcess(
                // A service name of its own: squid names its shared-memory segments after it, and
                // two squids of one name (tests side by side) collide there ("shm_open … File exists").
                squid, ["-N", "-n", "waftest\(getpid())n\(index)", "-f", directory.appendingPathComponent("squid.conf").path],
                output: directory.appendingPathComponent("stdout").path, diagnosed: true)
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                let log = (try? String(contentsOf: directory.appendingPathComponent("cache.log"), encoding: .utf8)) ?? ""
                if log.contains("Accepting HTTP Socket connections at") {
                    self.port = port
                    self.child = child
                    return
                }
                if log.contains("Cannot open HTTP Port") || log.contains("FATAL") || child.exitStatus != nil {
                    lastWords = lastLines(log, 5)
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            await child.stop(grace: .seconds(2))
        }
        throw SquidFailure("squid did not start on \(host): \(lastWords)")
    }

    /// Stops squid (SIGTERM; it flushes its access log as it goes).
    public func stop() async {
        await child.stop(grace: .seconds(5))
    }

    /// What the access log holds now. squid writes a line when a request ends, a `CONNECT` when
    /// its tunnel closes: read it after the peers closed their connections.
    public var entries: [Entry] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count == 5, let status = Int(fields[2]) else { return nil }
            return Entry(
                method: fields[0], target: fields[1], status: status, user: fields[3] == "-" ? nil : fields[3],
                outgoing: fields[4] == "-" ? nil : fields[4])
        }
    }

    /// The entries once squid wrote at least `count` of them that `chosen` picks (10 s at most).
    public func entries(atLeast count: Int = 1, where chosen: @Sendable (Entry) -> Bool) async -> [Entry] {
        let deadline = ContinuousClock.now + .seconds(10)
        var found = entries.filter(chosen)
        while found.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
            found = entries.filter(chosen)
        }
        return found
    }

    private static func configuration(_ options: Options, host: String, port: Int, in directory: URL) async throws -> String {
        let path = directory.path
        try (options.names.map { "127.0.0.1 \($0)\n" }.joined()).write(toFile: "\(path)/hosts", atomically: true, encoding: .utf8)
        var lines = [
            "http_port \(host):\(port)",
            "pid_filename \(path)/squid.pid",
            "cache_log \(path)/cache.log",
            // Method, target, status, user, and the address squid's own connection left from.
            "logformat egress %rm %ru %>Hs %un %<la",
            "access_log stdio:\(path)/access.log egress",
            "cache deny all",
            "coredump_dir \(path)",
            "netdb_filename none",
            "pinger_enable off",
            "hosts_file \(path)/hosts",
            "tcp_outgoing_address \(options.outgoingAddress)",
            "shutdown_lifetime 0 seconds",
        ]
        if !options.refusedPorts.isEmpty {
            lines += ["acl refused port \(options.refusedPorts.map(String.init).joined(separator: " "))", "http_access deny refused"]
        }
        if let credentials = options.credentials {
            try "\(credentials.user):\(await apr1(credentials.password))\n".write(toFile: "\(path)/passwd", atomically: true, encoding: .utf8)
            chmod("\(path)/passwd", 0o644)
            lines += [
                "auth_param basic program /usr/lib/squid/basic_ncsa_auth \(path)/passwd",
                "acl users proxy_auth REQUIRED",
                "http_access allow users",
            ]
        } else {
            lines.append("http_access allow all")
        }
        lines.append("http_access deny all")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The password's `htpasswd` hash, by `openssl passwd -apr1`.
    private static func apr1(_ password: String) async throws -> String {
        let (status, output, errors) = try await runDetached("/usr/bin/openssl", ["passwd", "-apr1", password], timeout: .seconds(20))
        let hash = output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == 0, hash.hasPrefix("$apr1$") else { throw SquidFailure("openssl passwd -apr1 failed: \(errors)") }
        return hash
    }

    /// The first port the kernel gives to binds to port 0 and to outgoing connections.
    private static func ephemeralRangeStart() -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) }.map { max($0, 16_000) } ?? 32_768
    }
}

public struct SquidFailure: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
