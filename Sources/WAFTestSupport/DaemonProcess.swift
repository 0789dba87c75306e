import Foundation
import WAFDaemonClient
import WAFTestTraits

/// A real `waf-tokend` child process in a scratch directory of its own, its stdout and stderr kept
/// in files so that tests can read what it said (and check that no token is in it). Started with
/// posix_spawn and reaped by its pid (`SpawnedProcess`), not by Foundation's `Process`, whose one
/// monitor for every child has stalled, and whose `run()` once crashed, under this suite's load.
public final class DaemonProcess: @unchecked Sendable {
    public let directory: URL
    private let child: SpawnedProcess
    /// The child as tests look at it: running, its pid, its exit status.
    public var process: ChildView { ChildView(child: child) }
    private let clientBox = ClientBox()

    public struct ChildView: Sendable {
        let child: SpawnedProcess
        public var isRunning: Bool { child.exitStatus == nil }
        public var processIdentifier: Int32 { child.pid }
        /// The exit status (128 + N for signal N); -1 while it runs.
        public var terminationStatus: Int32 { child.exitStatus ?? -1 }
    }
    public var socketPath: String { directory.appendingPathComponent("token.sock").path }
    public var stdoutPath: String { directory.appendingPathComponent("stdout.log").path }
    public var stderrPath: String { directory.appendingPathComponent("stderr.log").path }

    /// The usual arguments: the given service, domain 127.0.0.1, the scratch socket, no jitter,
    /// a short error-phase wait.
    public static func arguments(service: ServiceProcess?, socket: String) -> [String] {
        var arguments = [
            "--socket-path", socket, "--refresh-jitter", "false", "--max-error-token-refresh-delay-msec", "50",
            // Every forced refresh fetches, as most tests count on; the limit has tests of its own (TENANT-4).
            "--refresh-min-forced-interval-sec", "0",
            "--config", "/dev/null",
        ]
        if let service { arguments += ["--application-integration-url", service.url, "--domain-name", "127.0.0.1"] }
        return arguments
    }

    /// Starts `waf-tokend` with `arguments` (the usual ones when nil) and extra `environment`.
    /// `configFile` contents are written to `daemon.yaml` in the scratch directory.
    public init(
        service: ServiceProcess?, arguments extra: [String] = [], replacing: [String]? = nil, environment: [String: String] = [:],
        configFile: String? = nil, directory: URL? = nil, executable: String = "waf-tokend"
    ) throws {
        self.directory = directory ?? scratchPath("waf-tokend-test")
        try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        var arguments = replacing ?? Self.arguments(service: service, socket: self.directory.appendingPathComponent("token.sock").path)
        if let configFile {
            let path = self.directory.appendingPathComponent("daemon.yaml")
            try configFile.write(to: path, atomically: true, encoding: .utf8)
            if let index = arguments.firstIndex(of: "--config") { arguments.removeSubrange(index...index + 1) }
            arguments += ["--config", path.path]
        }
        let path = executable.hasPrefix("/") ? executable : productsDirectory.appendingPathComponent(executable).path
        // Only what the test sets: nothing of the runner's own WAF_TOKEND_*, systemd, journal or proxy state.
        var base = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix("WAF_TOKEND_")
                && ![
                    "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM", "STATE_DIRECTORY", "WATCHDOG_USEC",
                    "WATCHDOG_PID",
                    // A runner's own proxy would be every test's egress (EGRESS-1): a test sets one.
                    "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
                ].contains(key)
        }
        base.merge(environment) { _, new in new }
        let (stdoutPath, stderrPath) = (
            self.directory.appendingPathComponent("stdout.log").path, self.directory.appendingPathComponent("stderr.log").path
        )
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        child = try SpawnedProcess(path, arguments + extra, environment: base, output: stdoutPath, errors: stderrPath, diagnosed: false)
        let pid = child.pid
        TestDiagnostics.attach { [stdoutPath, stderrPath] in
            let said = [stdoutPath, stderrPath].map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }.joined()
            return "  waf-tokend, pid \(pid), in \(stderrPath): its last lines\n" + lastLines(said)
        }
    }

    /// Where a listener of the daemon listens, as bound (`metrics.listen`, `auth.listen`, `socket`):
    /// from the line it logs once every listener serves, so that a test configures port 0 and
    /// reads the port the system chose. Fails after 20 s, or when the daemon exits or says "off".
    public func listening(_ key: String) async throws -> String {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        while clock.now < deadline {
            if let line = stderr.split(separator: "\n").first(where: { $0.hasSuffix("serving the token API") }),
                let field = line.split(separator: " ").first(where: { $0.hasPrefix("\(key)=") })
            {
                let value = String(field.dropFirst(key.count + 1))
                guard value != "off" else { break }
                return value
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw DaemonExited(status: process.isRunning ? -1 : process.terminationStatus, stderr: "no address for \(key) in its log: " + stderr)
    }

    /// A client of this daemon's socket, made on first use and shut down by `stop()`.
    public var client: WAFTokenDaemonClient { clientBox.client(socketPath: socketPath) }

    /// Waits until the socket answers HTTP (whatever the status: a test may not be allowed in),
    /// or fails if the daemon exits or takes 20 s.
    public func waitUntilServing() async throws {
        for _ in 0..<1000 {
            if !process.isRunning { throw DaemonExited(status: process.terminationStatus, stderr: stderr) }
            if let socket = try? RawSocket(path: socketPath) {
                socket.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                if socket.response(timeout: .seconds(2)).status != nil { return }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw DaemonExited(status: -1, stderr: "not serving after 20 s: " + stderr)
    }

    /// Starts and waits until it serves.
    public static func serving(
        service: ServiceProcess?, arguments: [String] = [], environment: [String: String] = [:], configFile: String? = nil,
        directory: URL? = nil, executable: String = "waf-tokend"
    ) async throws -> DaemonProcess {
        let daemon = try DaemonProcess(
            service: service, arguments: arguments, environment: environment, configFile: configFile, directory: directory, executable: executable)
        do {
            try await daemon.waitUntilServing()
        } catch {
            await daemon.stop()
            throw error
        }
        return daemon
    }

    public func signal(_ number: Int32) {
        child.signal(number)
    }

    /// Waits for the process to exit and returns its status, or nil after `timeout`.
    public func waitForExit(timeout: Duration = .seconds(20)) async -> Int32? {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while process.isRunning {
            if clock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// SIGTERM, then the exit status.
    @discardableResult
    public func stop() async -> Int32? {
        if process.isRunning { signal(SIGTERM) }
        let status = await waitForExit()
        if status == nil { signal(SIGKILL) }
        await clientBox.shutdown()
        return status
    }

    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// The tokens among `tokens` that appear anywhere in what the daemon printed.
    public func leaked(_ tokens: some Sequence<String>) -> [String] {
        let output = stdout + stderr
        return tokens.filter { !$0.isEmpty && output.contains($0) }
    }
}

/// AsyncHTTPClient insists on an explicit shutdown: the client exists only once used.
private final class ClientBox: @unchecked Sendable {
    private let lock = NSLock()
    private var made: WAFTokenDaemonClient?

    func client(socketPath: String) -> WAFTokenDaemonClient {
        lock.withLock {
            if let made { return made }
            let client = WAFTokenDaemonClient(socketPath: socketPath)
            made = client
            return client
        }
    }

    func shutdown() async {
        let client = lock.withLock { () -> WAFTokenDaemonClient? in
            defer { made = nil }
            return made
        }
        await client?.shutdown()
    }

    deinit {
        // A test that stopped early: shut the client down rather than let it trap in its deinit.
        if let made { Task { await made.shutdown() } }
    }
}

public struct DaemonExited: Error, CustomStringConvertible {
    public let status: Int32
    public let stderr: String
    public var description: String { "waf-tokend exited with \(status): \(stderr)" }
}

/// Polls `condition` every 20 ms for up to `timeout`; for states reached asynchronously.
public func eventually(for timeout: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    repeat {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    } while ContinuousClock.now < deadline
    return await condition()
}

/// `curl --unix-socket SOCKET … http://localhost/PATH`, returning status code and body.
public func curl(_ socket: String, _ path: String, _ options: [String] = []) async throws -> (code: Int, body: String) {
    let result = try await run(
        "/usr/bin/curl",
        ["-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", socket] + options + ["http://localhost\(path)"])
    var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.popLast() ?? "") ?? 0
    // No answer at all: curl's own words (connection refused, empty reply, timeout) are the body,
    // so that a failing expectation says what happened.
    return (code, code == 0 ? result.stderr : lines.joined(separator: "\n"))
}
