import Foundation
import Testing
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// Floods, slow clients and clients that pipeline without reading, against a daemon kept under the
/// shipped unit's `MemoryMax=`: it must never be killed for memory, and other clients must not
/// notice (p99 under 10 ms).
@Suite("Reliability: load", .offPool, .serialized, .timeLimit(.minutes(30)))
struct LoadTests {
    @Test("pipelining without reading: memory stays bounded, nothing is killed, others are served on time")
    func pipeliningWithoutReading() async throws {
        try await underLimit { daemon, limit in
            let pid = daemon.process.processIdentifier
            let before = ProcessReadings.residentKiB(pid) ?? 0
            let seconds = Scale.pick(3, full: 30)
            let pushers = (0..<8).map { index in Pusher(path: daemon.socketPath, request: index % 2 == 0 ? "GET /v1/token" : "GET /v1/cookie?path=/")
            }
            for pusher in pushers { pusher.start(for: .seconds(seconds)) }
            try await Task.sleep(for: .seconds(1))
            let latencies = probeLatencies(socket: daemon.socketPath, count: 2000)
            for pusher in pushers { await pusher.wait() }
            let after = ProcessReadings.residentKiB(pid) ?? .max
            let sent = pushers.reduce(0) { $0 + $1.bytesSent }
            Scale.report(
                "pipelining without reading, 8 clients, \(seconds) s: \(sent / 1024) KiB sent, RSS \(before / 1024) → \(after / 1024) MiB, peak \(limit.peakBytes.map { "\($0 >> 20) MiB" } ?? "?") of \(try MemoryLimit.shippedUnitLimit() >> 20) MiB, others' p99 \(String(format: "%.2f", quantile(latencies, 0.99) * 1000)) ms, OOM kills \(limit.oomKills)"
            )
            #expect(after - before < 16 * 1024, "RSS grew \((after - before) / 1024) MiB")
            #expect(limit.oomKills == 0 && daemon.process.isRunning)
            #expect(latencies.count == 2000 && quantile(latencies, 0.99) < Scale.othersP99Bound)
        }
    }

    @Test("a flood of idle connections and slow clients: the daemon serves others within 10 ms at p99 and cuts the slow ones off")
    func floodsAndSlowClients() async throws {
        try await underLimit(arguments: ["--socket-request-timeout-sec", "3"]) { daemon, limit in
            let idle = Scale.pick(500, full: 2000)
            let slow = Scale.pick(100, full: 500)
            var sockets: [RawSocket] = []
            for _ in 0..<idle { if let socket = try? RawSocket(path: daemon.socketPath) { sockets.append(socket) } }
            let drippers = (0..<slow).compactMap { _ in try? RawSocket(path: daemon.socketPath) }
            let drip = Task.detached {
                let request = Array("GET /v1/token HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
                for byte in request.prefix(30) {
                    for socket in drippers { _ = socket.send([byte]) }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            let latencies = probeLatencies(socket: daemon.socketPath, count: 3000)
            await drip.value
            let cutOff = drippers.filter { $0.receive(timeout: .seconds(5)).closed }.count
            Scale.report(
                "\(sockets.count) idle and \(drippers.count) slow connections: others' p50 \(String(format: "%.2f", quantile(latencies, 0.5) * 1000)) ms, p99 \(String(format: "%.2f", quantile(latencies, 0.99) * 1000)) ms; \(cutOff) slow clients cut off; peak \(limit.peakBytes.map { "\($0 >> 20) MiB" } ?? "?"), OOM kills \(limit.oomKills)"
            )
            #expect(latencies.count == 3000 && quantile(latencies, 0.99) < Scale.othersP99Bound)
            #expect(cutOff == drippers.count, "every slow client gets 408 and is closed")
            #expect(limit.oomKills == 0 && daemon.process.isRunning)
        }
    }

    @Test("a soak of token reads: RSS grows by less than 1 MiB, descriptors stay where they were")
    func soak() async throws {
        let requests = Scale.pick(300_000, full: 10_000_000)
        try await underLimit { daemon, limit in
            let pid = daemon.process.processIdentifier
            _ = try await run(
                "/usr/bin/h2load", ["--h1", "-B", "unix:\(daemon.socketPath)", "-n", "50000", "-c", "16", "-t", "1", "http://localhost/v1/token"],
                timeout: .seconds(120))
            let (rss, fds) = (ProcessReadings.residentKiB(pid) ?? 0, ProcessReadings.openDescriptors(pid) ?? 0)
            let load = try await run(
                "/usr/bin/h2load",
                ["--h1", "-B", "unix:\(daemon.socketPath)", "-n", String(requests), "-c", "16", "-t", "1", "http://localhost/v1/token"],
                timeout: .seconds(1800))
            try await Task.sleep(for: .milliseconds(500))
            let (rssAfter, fdsAfter) = (ProcessReadings.residentKiB(pid) ?? .max, ProcessReadings.openDescriptors(pid) ?? .max)
            let succeeded = load.stdout.split(separator: "\n").first { $0.contains("requests:") }.map(String.init) ?? load.stdout
            Scale.report(
                "soak of \(requests) token reads: RSS \(rss) → \(rssAfter) KiB (\(rssAfter - rss) KiB), descriptors \(fds) → \(fdsAfter); \(succeeded.trimmingCharacters(in: .whitespaces))"
            )
            #expect(load.status == 0 && load.stdout.contains("\(requests) succeeded"))
            #expect(rssAfter - rss < 1024)
            // Not one more: a connection of the warm-up that closes meanwhile may make it one fewer.
            #expect(fdsAfter <= fds)
            #expect(limit.oomKills == 0)
        }
    }

    /// A daemon with a token, moved into a memory cgroup with the unit's limit, for `body`.
    private func underLimit(arguments: [String] = [], _ body: (DaemonProcess, MemoryLimit) async throws -> Void) async throws {
        let limit = try MemoryLimit(bytes: try MemoryLimit.shippedUnitLimit())
        try await withDaemon(daemon: arguments + ["--log-level", "warning"], executable: Scale.daemon) { _, daemon in
            try limit.add(daemon.process.processIdentifier)
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            try await body(daemon, limit)
        }
    }
}

/// A client that sends pipelined requests as fast as the daemon takes them and never reads.
final class Pusher: @unchecked Sendable {
    private let path: String
    private let request: String
    private var task: Task<Void, Never>?
    private(set) var bytesSent = 0

    init(path: String, request: String) {
        self.path = path
        self.request = request
    }

    /// Sends on a thread of its own: the loop blocks in `send` (found by the pool watcher: eight
    /// of them on the concurrency pool held it for 12 s).
    func start(for duration: Duration) {
        task = Task { await onOwnThread { [self] in flood(for: duration) } }
    }

    private func flood(for duration: Duration) {
        guard let socket = try? RawSocket(path: path) else { return }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(socket.descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let chunk = Array(String(repeating: "\(request) HTTP/1.1\r\nHost: localhost\r\n\r\n", count: 100).utf8)
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            let sent = chunk.withUnsafeBytes { Glibc.send(socket.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 { bytesSent += sent } else if errno != EAGAIN && errno != EINTR { break }
        }
        withExtendedLifetime(socket) {}
    }

    func wait() async {
        await task?.value
    }
}
