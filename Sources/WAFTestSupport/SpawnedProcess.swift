import Foundation
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// A child started with posix_spawn, for programs that close every descriptor they did not make,
/// such as `systemd-socket-activate`. Foundation's `Process` learns of a child's exit through a
/// socket the child inherits; a child that closes it looks dead to Foundation, whose monitor
/// thread then blocks in wait4 for it, and with it every other `Process` of the test run.
public final class SpawnedProcess: @unchecked Sendable {
    public let pid: pid_t
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `executable` with `arguments`; stdout goes to the file at `output`, and stderr too
    /// unless `errors` names a file of its own. `descriptors` become the child's 3, 4, … (sockets
    /// a test bound itself, passed as a service manager passes them).
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, output: String, errors: String? = nil,
        descriptors: [CInt] = [], diagnosed: Bool = true, newSession: Bool = false
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errors {
            posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Nothing else of the test process: a copy of the socket by which Foundation watches one of
        // its own children would hide that child's exit for as long as this one lives.
        // A source among the targets would be overwritten before it is copied.
        precondition(descriptors.allSatisfy { $0 >= 3 + Int32(descriptors.count) }, "pass descriptors above the ones they become")
        for (index, descriptor) in descriptors.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, descriptor, 3 + Int32(index))
        }
        closeFrom(&actions, 3 + Int32(descriptors.count))
        let environment = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        // Signals as a new program expects them: none blocked (the test run may block some on its
        // threads), every one at its default. In the test run's session (scripts/swift-test.sh
        // kills what is left of it after a crash) unless `newSession`: a terminal-minded child such
        // as systemd-nspawn must not take over the terminal of a run started by hand.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        let setsid: Int16 = newSession ? 0x80 : 0  // POSIX_SPAWN_SETSID, a GNU extension the Glibc module leaves out
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) | setsid)
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        self.pid = pid
        let name = URL(fileURLWithPath: executable).lastPathComponent
        guard diagnosed else { return }
        TestDiagnostics.attach { [pid] in
            let said = [output, errors].compactMap { $0 }.map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }.joined()
            return "  \(name), pid \(pid), in \(output): its last lines\n" + lastLines(said)
        }
    }

    /// Under the lock that reaps it: a child reaped in between would leave its pid to another.
    public func signal(_ number: Int32) {
        lock.withLock { if status == nil { kill(pid, number) } }
    }

    /// The exit status (128 + signal for a signalled child), or nil while it runs.
    public var exitStatus: Int32? {
        lock.withLock {
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    let signalled = raw & 0x7f
                    status = signalled == 0 ? (raw >> 8) & 0xff : 128 + signalled
                }
            }
            return status
        }
    }

    /// Waits (bounded) for the exit and returns its status.
    public func waitForExit(timeout: Duration = .seconds(20)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let exitStatus { return exitStatus }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// `waitForExit` for a caller that cannot suspend.
    public func waitForExitBlocking(timeout: Duration = .seconds(20)) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let exitStatus { return exitStatus }
            usleep(20_000)
        }
        return nil
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace`; returns the exit status.
    @discardableResult
    public func stop(grace: Duration = .seconds(10)) async -> Int32? {
        signal(SIGTERM)
        if let status = await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return await waitForExit()
    }

    deinit {
        // Bounded: a child stuck in the kernel (D state) must not hang the thread that lets it go.
        if exitStatus == nil {
            signal(SIGKILL)
            _ = waitForExitBlocking(timeout: .seconds(5))
        }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which the Glibc module
/// does not import (it is a GNU extension): looked up at run time.
private func closeFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) {
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
        preconditionFailure("glibc without posix_spawn_file_actions_addclosefrom_np (2.34 and later have it)")
    }
    _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
}

/// A command to its end: started with posix_spawn and nothing but stdin, stdout and stderr (a
/// daemon it leaves behind, as `podman run -d` leaves conmon, holds nothing of the test run's),
/// output through files; after `timeout`, SIGTERM, then SIGKILL. `diagnosed`: a stuck test prints
/// its last lines.
public func runDetached(
    _ executable: String, _ arguments: [String], timeout: Duration = .seconds(120), diagnosed: Bool = true
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let directory = try scratchDirectory("waf-run")
    defer { try? FileManager.default.removeItem(at: directory) }
    let out = directory.appendingPathComponent("stdout").path, err = directory.appendingPathComponent("stderr").path
    let child = try SpawnedProcess(executable, arguments, output: out, errors: err, diagnosed: diagnosed)
    var status = await child.waitForExit(timeout: timeout)
    if status == nil { status = await child.stop(grace: .seconds(2)) }
    let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    return (status ?? -1, read(out), read(err))
}
