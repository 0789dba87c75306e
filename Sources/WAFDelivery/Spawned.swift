import CLinuxProcess
import Dispatch
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn in a process group of its own, watched through a
/// pidfd (its exit is a readable descriptor: waited for with a deadline, never a signal handler).
/// The group ends with it (HOOK-7, EXEC-5): what the child left running when it ended, or what
/// still runs when it is ended, gets SIGTERM, then SIGKILL after a grace. The group is signalled
/// only while its leader is not reaped: the leader's pid, the group's id, cannot be another's then.
/// Every child is reaped, one stuck in the kernel (uninterruptible sleep) too, once it leaves it.
/// A kernel without pidfds (before 5.3) is waited on by polling, every 10 ms, within the same bounds.
public final class Spawned: @unchecked Sendable {
    // Sendable by hand: `pid` and `pidfd` are set once in init and only read after; `reaped` is
    // behind `lock` (NIO's pthread lock, which the thread sanitizer sees).
    public let pid: pid_t
    private let pidfd: Int32
    private let lock = NIOLock()
    private var reaped: Ending?

    /// How long a hook's group has after SIGTERM before SIGKILL.
    public static let hookGrace = Duration.seconds(2)

    public enum Input {
        case null
        case inherit
        /// These bytes, then end of file.
        case pipe([UInt8])
    }

    public enum Output {
        case null
        case inherit
    }

    public enum Ending: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)

        /// What a shell reports: the status, or 128 + the signal.
        public var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signalled(let signal): 128 + signal
            }
        }
    }

    /// Whether this kernel has pidfds; without them children are watched by polling (the daemon
    /// says so once in its log).
    public static let pidfdsAvailable: Bool = {
        let descriptor = pidfd_open(getpid(), 0)
        guard descriptor >= 0 else { return false }
        close(descriptor)
        return true
    }()

    /// `searchPath`: a program without a `/` is looked for on `PATH`, as a shell would (the exec
    /// supervisor's command; a delivery action's program is an absolute path). `foreground`: the
    /// child's group becomes the foreground group of the terminal on standard input, as a shell
    /// makes a job it starts (an interactive command under exec keeps its terminal).
    /// `watchedByPidfd`: false watches it by polling, as on a kernel without pidfds (the tests).
    /// `stopGrace`: how long its group has after SIGTERM when the process ends at once
    /// (`endEveryGroup`): as long as the caller's own stop would give it.
    public init(
        _ argv: [String], environment: [String: String], stdin: Input, output: Output, searchPath: Bool = false, foreground: Bool = false,
        watchedByPidfd: Bool = Spawned.pidfdsAvailable, stopGrace: Duration = Spawned.hookGrace
    ) throws(DeliveryFailure) {
        guard let program = argv.first else { throw DeliveryFailure("an empty command") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipeEnds: [Int32] = [-1, -1]
        switch stdin {
        case .null: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .inherit: break
        case .pipe:
            guard pipe2(&pipeEnds, O_CLOEXEC) == 0 else { throw DeliveryFailure("cannot make a pipe: \(String(cString: strerror(errno)))") }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        }
        if case .null = output {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        if foreground { posix_spawn_file_actions_addtcsetpgrp_np(&actions, 0) }
        // Nothing else of the daemon's: not its sockets, not its files.
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Signals as a new program expects them: none blocked, every one at its default.
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // A process group of its own, whose id is the child's pid: the group is what ends.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let arguments = argv.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (arguments + variables).forEach { free($0) } }
        var pid: pid_t = 0
        // Started and listed under one hold of the list: `endEveryGroup`, which holds it until the
        // process exits, sees every child, and none starts once it has begun.
        let spawned = Children.change { unreaped in
            // Once the groups are being ended, nothing starts: a spawn that took the list after
            // the handler gave up waiting for it would start a child no list holds.
            guard !Children.ending.load(ordering: .acquiring) else { return ECANCELED }
            let spawned =
                searchPath
                ? posix_spawnp(&pid, program, &actions, &attributes, arguments, variables)
                : posix_spawn(&pid, program, &actions, &attributes, arguments, variables)
            if spawned == 0 { unreaped[pid] = stopGrace }
            return spawned
        }
        if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
        guard spawned == 0 else {
            if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
            throw DeliveryFailure("cannot start \(program): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        pidfd = watchedByPidfd ? pidfd_open(pid, 0) : -1
        if case .pipe(let bytes) = stdin {
            // A child that does not read gets end of file after what the pipe holds (64 KiB): a
            // token is far smaller, so this never blocks on a child that ignores its input.
            var written = 0
            bytes.withUnsafeBytes { raw in
                while written < raw.count {
                    let count = write(pipeEnds[1], raw.baseAddress! + written, raw.count - written)
                    if count > 0 { written += count } else if errno != EINTR { break }
                }
            }
            close(pipeEnds[1])
        }
    }

    deinit {
        if pidfd >= 0 { close(pidfd) }
    }

    /// The group's members that still run, the leader included (not the dead waiting to be reaped).
    public var groupRuns: Bool { !ProcessGroup.live(pid).isEmpty }

    /// Sends `signal` to the child alone, unless it was reaped (its pid may be another's by then).
    public func kill(_ signal: Int32) {
        lock.withLock {
            guard reaped == nil else { return }
            if pidfd >= 0 { _ = pidfd_send_signal(pidfd, signal, nil, 0) } else { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Sends `signal` to the child's whole group, unless the child was reaped.
    public func signalGroup(_ signal: Int32) {
        lock.withLock {
            guard reaped == nil else { return }
            _ = Glibc.kill(-pid, signal)
        }
    }

    /// Waits up to `timeout` (nil: for ever) for the child to end; then ends what it left running in
    /// its group (SIGTERM, SIGKILL after `leftoverGrace`) and reaps it. Nil while it still runs.
    public func wait(timeout: Duration?, leftoverGrace: Duration = Spawned.hookGrace) -> Ending? {
        if let ended = lock.withLock({ reaped }) { return ended }
        guard waitForExit(timeout: timeout) else { return nil }
        if !ProcessGroup.live(pid).isEmpty { endGroup(grace: leftoverGrace) }
        return reap()
    }

    /// Ends the whole group now: SIGTERM, SIGKILL after `grace` to what still runs; then reaps the
    /// child. A child that stays (in uninterruptible sleep) is reaped in the background once it
    /// leaves it; nil then.
    @discardableResult
    public func terminate(grace: Duration) -> Ending? {
        if let ended = lock.withLock({ reaped }) { return ended }
        endGroup(grace: grace)
        guard waitForExit(timeout: .seconds(5)) else {
            DispatchQueue.global().async { [self] in
                _ = waitForExit(timeout: nil)
                _ = reap()
            }
            return nil
        }
        return reap()
    }

    /// SIGTERM to the group, and SIGKILL to it after `grace` unless nothing of it runs by then.
    private func endGroup(grace: Duration) {
        let running = { !ProcessGroup.live(self.pid).isEmpty }
        signalGroup(SIGTERM)
        // Stopped members would sleep through SIGTERM: they go on, to end.
        signalGroup(SIGCONT)
        let clock = ContinuousClock()
        let deadline = clock.now + grace
        while clock.now < deadline, running() { usleep(10_000) }
        guard running() else { return }
        signalGroup(SIGKILL)
        // A killed process runs until the kernel has torn it down, which a loaded machine takes
        // its time over: the group is ended when none of it runs, not when the signal is sent.
        let killed = clock.now + .seconds(2)
        while clock.now < killed, running() {
            usleep(5_000)
            // Again: a member forking as the first one came may leave a child.
            signalGroup(SIGKILL)
        }
    }

    /// Whether the child ended within `timeout` (nil: for ever), without reaping it: until then its
    /// pid, the group's id, stays its own.
    private func waitForExit(timeout: Duration?) -> Bool {
        if lock.withLock({ reaped }) != nil { return true }
        let clock = ContinuousClock()
        let deadline = timeout.map { clock.now + $0 }
        if pidfd >= 0 {
            var poller = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            while true {
                let left = deadline.map { max(clock.now.duration(to: $0), .zero) }
                let milliseconds =
                    left.map { Int32(clamping: $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? -1
                let ready = poll(&poller, 1, milliseconds)
                if ready > 0 { return true }
                if ready == 0 { return false }
                guard errno == EINTR else { return false }
            }
        }
        // No pidfds: the exit is looked for every 10 ms, without reaping (WNOWAIT).
        while true {
            var info = siginfo_t()
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0, info._sifields._sigchld.si_pid == pid { return true }
            if let deadline, clock.now >= deadline { return false }
            usleep(10_000)
        }
    }

    /// Reaps the child, which has ended; once.
    private func reap() -> Ending {
        lock.withLock {
            if let reaped { return reaped }
            Children.change { _ = $0.removeValue(forKey: pid) }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &raw, 0) } while result < 0 && errno == EINTR
            let signalled = raw & 0x7f
            let ending: Ending = signalled == 0 ? .exited((raw >> 8) & 0xff) : .signalled(signalled)
            reaped = ending
            return ending
        }
    }
}
