import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking `work` (a read from a pipe, a wait for a child) on a thread of its own. The
/// cooperative pool has as many threads as cores, two here: a test that blocked one of them on a
/// pipe would stall every other test, and the in-process providers with them.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// Drains a pipe on its own thread until end of file, or until a while after `giveUp(after:)`:
/// a background grandchild that inherited the pipe would otherwise keep it open for ever.
final class PipeDrain: @unchecked Sendable {
    private let descriptor: Int32
    private let lock = NSLock()
    private var deadline: ContinuousClock.Instant?

    init(_ descriptor: Int32) {
        self.descriptor = descriptor
    }

    func giveUp(after grace: Duration) {
        lock.withLock { deadline = .now + grace }
    }

    func bytes() async -> [UInt8] {
        await onOwnThread { self.drain() }
    }

    private func drain() -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 50)
            if ready == 0 || (ready < 0 && errno == EINTR) {
                if let deadline = lock.withLock({ deadline }), ContinuousClock.now > deadline { return bytes }
                continue
            }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += buffer.prefix(count)
            } else if count < 0, errno == EINTR {
                continue
            } else {
                return bytes
            }
        }
    }
}

/// Runs a command (curl, setpriv, a shell script) to completion and returns its exit status and
/// output. After `timeout` it gets SIGTERM, two seconds later SIGKILL; output that background
/// grandchildren keep writing is not waited for.
@discardableResult
public func run(
    _ executable: String, _ arguments: [String], timeout: Duration = .seconds(30)
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    // Not the test run's stdin, which may be a terminal: programs change course on one (wget, under
    // debootstrap, logs to a wget-log file when it finds itself in the background of a terminal).
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = PipeDrain(out.fileHandleForReading.fileDescriptor), stderr = PipeDrain(err.fileHandleForReading.fileDescriptor)
    async let outBytes = stdout.bytes()
    async let errBytes = stderr.bytes()
    let clock = ContinuousClock()
    var deadline = clock.now + timeout
    var terminated = false
    while process.isRunning {
        if clock.now > deadline {
            if terminated {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            process.terminate()
            terminated = true
            deadline = clock.now + .seconds(2)
        }
        try? await Task.sleep(for: .milliseconds(10))
    }
    await onOwnThread { process.waitUntilExit() }
    stdout.giveUp(after: .seconds(2))
    stderr.giveUp(after: .seconds(2))
    let status = process.terminationStatus
    return (status, String(decoding: await outBytes, as: UTF8.self), String(decoding: await errBytes, as: UTF8.self))
}
