import CLinuxProcess

#if canImport(Glibc)
import Glibc
#endif

/// A command run once for a new token: its argv as configured (no shell), the token on standard
/// input only (never in argv or the environment, where other users' `ps` and `/proc` see them),
/// output discarded (a command that echoes its input must not put the token in a log), run as the
/// daemon's user; killed (SIGKILL) when it outlives `timeout`. Blocks the calling thread: run it
/// on a thread of its own.
public enum CommandRun {
    /// `started` is told of the child (whoever stops the daemon may kill it).
    public static func run(
        _ argv: [String], input: String, environment: [String: String], timeout: Duration, started: (Spawned) -> Void = { _ in }
    ) throws(DeliveryFailure) {
        let child = try Spawned(argv, environment: environment, stdin: .pipe(Array(input.utf8)), output: .null)
        started(child)
        switch child.wait(timeout: timeout) {
        case .exited(0):
            return
        case .exited(let status):
            throw DeliveryFailure("\(argv[0]) exited with \(status)")
        case .signalled(let signal):
            throw DeliveryFailure("\(argv[0]) was killed by signal \(signal)")
        case nil:
            child.kill(SIGKILL)
            _ = child.wait(timeout: .seconds(5))
            throw DeliveryFailure("\(argv[0]) still ran after \(timeout.components.seconds) s; killed", timedOut: true)
        }
    }
}

/// A child process started with posix_spawn, watched through a pidfd (its exit is a readable
/// descriptor: waited for with a deadline, never a signal handler).
public final class Spawned: @unchecked Sendable {
    // Sendable by hand: `pid` and `pidfd` are set once in init and only read after; `reaped` is
    // behind `lock`.
    public let pid: pid_t
    private let pidfd: Int32
    private let lock = pthreadLock()
    private var reaped: Ending?

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

    /// `searchPath`: a program without a `/` is looked for on `PATH`, as a shell would (the exec
    /// supervisor's command; a delivery action's program is an absolute path).
    public init(_ argv: [String], environment: [String: String], stdin: Input, output: Output, searchPath: Bool = false) throws(DeliveryFailure) {
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
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let arguments = argv.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (arguments + variables).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned =
            searchPath
            ? posix_spawnp(&pid, program, &actions, &attributes, arguments, variables)
            : posix_spawn(&pid, program, &actions, &attributes, arguments, variables)
        if pipeEnds[0] >= 0 { close(pipeEnds[0]) }
        guard spawned == 0 else {
            if pipeEnds[1] >= 0 { close(pipeEnds[1]) }
            throw DeliveryFailure("cannot start \(program): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        pidfd = pidfd_open(pid, 0)
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

    /// Sends `signal` to the child, unless it was reaped (its pid may be another's by then).
    public func kill(_ signal: Int32) {
        lock.locked {
            guard reaped == nil, pidfd >= 0 else { return }
            _ = pidfd_send_signal(pidfd, signal, nil, 0)
        }
    }

    /// Waits for the child's end for up to `timeout` (nil: for ever); nil if it still runs.
    public func wait(timeout: Duration?) -> Ending? {
        if let ended = lock.locked({ reaped }) { return ended }
        if pidfd >= 0 {
            var poller = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            let milliseconds = timeout.map { Int32(clamping: $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? -1
            var ready: Int32
            repeat { ready = poll(&poller, 1, milliseconds) } while ready < 0 && errno == EINTR
            guard ready > 0 else { return nil }
        }
        var raw: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &raw, 0) } while result < 0 && errno == EINTR
        let signalled = raw & 0x7f
        let ending: Ending = signalled == 0 ? .exited((raw >> 8) & 0xff) : .signalled(signalled)
        lock.locked { reaped = ending }
        return ending
    }
}

/// A pthread mutex: the sanitizer sees it (docs/decisions.md, "Locks"). On the heap, at an address
/// of its own: `&` of a stored property promises no stable address to C.
final class pthreadLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }
}
