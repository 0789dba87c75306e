import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// TENANT-12: a peer's bytes are the daemon's memory only within `limits.bufferedBytes`. One uid
/// posting bodies to an upstream that never answers, on a thousand connections, once took the
/// daemon to 137 MiB, past the unit's `MemoryMax=`.
@Suite("Reliability: what peers may make the daemon hold", .offPool, .serialized, .timeLimit(.minutes(5)))
struct MemoryBudgetTests {
    /// Opens `count` connections to the proxy at `socket` and sends on each a POST with a body of
    /// `size` bytes, then holds them open for `hold` seconds; prints how many were sent whole.
    static let flood = """
        import socket, sys, time
        path, count, size, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
        body = b"x" * size
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.settimeout(0.5)
            data = f"POST /slow HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: {size}\\r\\n\\r\\n".encode() + body
            try:
                s.sendall(data)
            except socket.timeout:
                pass
            held.append(s)
        print(len(held), flush=True)
        time.sleep(hold)
        """

    /// Opens `count` connections to the proxy at `socket`, sends a GET on each, then holds them
    /// for `hold` seconds; prints how many it opened, then how many were answered 503 (refused for
    /// the budget) and how many nothing at all (waiting on the silent upstream).
    static let requests = """
        import socket, sys, time
        path, count, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.sendall(b"GET /slow HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            held.append(s)
        print(len(held), flush=True)
        time.sleep(hold)
        refused = silent = 0
        for s in held:
            s.setblocking(False)
            try:
                answer = s.recv(4096)
            except BlockingIOError:
                silent += 1
                continue
            if answer.startswith(b"HTTP/1.1 503") and b"overBudget" in answer:
                refused += 1
        print(refused, silent, flush=True)
        """

    @Test(
        "TENANT12: 1,000 connections of one uid to an https upstream that completes the handshake and never answers keep the daemon under the unit's MemoryMax: that uid gets 503 past its share, another uid reads its token meanwhile"
    )
    func TENANT12_tlsUpstreamsOfOnePeer() async throws {
        let connections = Scale.pick(1000, full: 1000)
        let certificates = try TestCertificates()
        let upstream = try await SilentUpstream(certificates: certificates)
        let directory = try scratchDirectory("waf-memory-tls")
        chmod(directory.path, 0o755)
        let proxy = directory.appendingPathComponent("proxy.sock").path
        let limit = try MemoryLimit(bytes: try MemoryLimit.shippedUnitLimit())
        let arguments = [
            "--proxy-listen", proxy, "--proxy-mode", "0666", "--proxy-upstream", "\(upstream.origin)/", "--proxy-upstream-timeout-sec", "120",
            "--token-service-ca-file", certificates.authority, "--socket-max-connections-per-user", "2048", "--log-level", "warning",
        ]
        do {
            // Started inside the group, as systemd starts the unit: its start is charged too.
            try await withDaemon(daemon: arguments, executable: try limit.starting(Scale.daemon)) { _, daemon in
                _ = try await daemon.client.tokenReady(wait: .seconds(10))
                let pid = daemon.process.processIdentifier
                let before = ProcessReadings.residentKiB(pid) ?? 0
                let script = directory.appendingPathComponent("requests.py").path
                try Self.requests.write(toFile: script, atomically: true, encoding: .utf8)
                let flood = try SpawnedProcess(
                    "/usr/bin/setpriv",
                    ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/python3", script, proxy, String(connections), "15"],
                    output: directory.appendingPathComponent("flood.log").path)
                let log = { (try? String(contentsOfFile: directory.appendingPathComponent("flood.log").path, encoding: .utf8)) ?? "" }
                #expect(await eventually(for: .seconds(120)) { !log().isEmpty }, "the flood opened its connections: \(log())")
                try await Task.sleep(for: .seconds(3))
                let latencies = probeLatencies(socket: daemon.socketPath, count: 500)
                let during = ProcessReadings.residentKiB(pid) ?? .max
                #expect(await eventually(for: .seconds(60)) { log().split(separator: "\n").count >= 2 }, "the flood read its answers: \(log())")
                let counts = log().split(separator: "\n").last.map { $0.split(separator: " ").compactMap { Int($0) } } ?? []
                Scale.report(
                    "\(connections) connections of one uid to a silent https upstream: RSS \(before / 1024) → \(during / 1024) MiB, peak \(limit.peakBytes.map { "\($0 >> 20) MiB" } ?? "?") of \(try MemoryLimit.shippedUnitLimit() >> 20) MiB (reached \(limit.limitReached) times), \(counts.first ?? -1) refused with 503, \(counts.last ?? -1) waiting; another uid's token reads p99 \(String(format: "%.2f", quantile(latencies, 0.99) * 1000)) ms, OOM kills \(limit.oomKills)"
                )
                #expect(limit.oomKills == 0 && daemon.process.isRunning, "the daemon is never killed for its peers' upstream connections")
                #expect(limit.limitReached == 0, "the daemon never neared its limit: it reached it \(limit.limitReached) times")
                #expect(
                    counts.count == 2 && counts[0] > 0 && counts[1] > 0, "past its share the uid is refused; within it, its requests wait upstream")
                #expect(latencies.count == 500 && quantile(latencies, 0.99) < Scale.othersP99Bound, "another uid's reads go on")
                _ = await flood.stop()
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test(
        "TENANT12: 10 uids with 100 connections each posting 64 KiB to a plain upstream that never answers keep the daemon under the unit's MemoryMax"
    )
    func TENANT12_bodiesOfManyPeers() async throws {
        let perUser = Scale.pick(100, full: 100)
        let upstream = try await SilentUpstream()
        let directory = try scratchDirectory("waf-memory-uids")
        chmod(directory.path, 0o755)
        let proxy = directory.appendingPathComponent("proxy.sock").path
        let limit = try MemoryLimit(bytes: try MemoryLimit.shippedUnitLimit())
        let arguments = [
            "--proxy-listen", proxy, "--proxy-mode", "0666", "--proxy-upstream", upstream.origin, "--proxy-upstream-timeout-sec", "120",
            "--log-level", "warning",
        ]
        do {
            // Started inside the group, as systemd starts the unit: its start is charged too.
            try await withDaemon(daemon: arguments, executable: try limit.starting(Scale.daemon)) { _, daemon in
                _ = try await daemon.client.tokenReady(wait: .seconds(10))
                let script = directory.appendingPathComponent("flood.py").path
                try Self.flood.write(toFile: script, atomically: true, encoding: .utf8)
                var floods: [SpawnedProcess] = []
                for index in 0..<10 {
                    let uid = 20_000 + index
                    floods.append(
                        try SpawnedProcess(
                            "/usr/bin/setpriv",
                            [
                                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", script, proxy, String(perUser), "65536",
                                "15",
                            ], output: directory.appendingPathComponent("flood-\(index).log").path))
                }
                let opened = {
                    (0..<10).filter { index in
                        !((try? String(contentsOfFile: directory.appendingPathComponent("flood-\(index).log").path, encoding: .utf8)) ?? "").isEmpty
                    }.count
                }
                #expect(await eventually(for: .seconds(120)) { opened() == 10 }, "every uid opened its connections")
                try await Task.sleep(for: .seconds(2))
                let latencies = probeLatencies(socket: daemon.socketPath, count: 500)
                Scale.report(
                    "10 uids × \(perUser) connections posting 64 KiB to a silent upstream: peak \(limit.peakBytes.map { "\($0 >> 20) MiB" } ?? "?") of \(try MemoryLimit.shippedUnitLimit() >> 20) MiB, another uid's token reads p99 \(String(format: "%.2f", quantile(latencies, 0.99) * 1000)) ms, OOM kills \(limit.oomKills)"
                )
                #expect(limit.oomKills == 0 && daemon.process.isRunning, "the daemon is never killed for its peers' bytes")
                #expect(limit.limitReached == 0, "the daemon never neared its limit: it reached it \(limit.limitReached) times")
                #expect(latencies.count == 500 && quantile(latencies, 0.99) < Scale.othersP99Bound, "another uid's reads go on")
                for flood in floods { _ = await flood.stop() }
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }

    @Test(
        "TENANT12: 1,000 connections of one uid posting 64 KiB each to an upstream that never answers keep the daemon under the unit's MemoryMax, and another uid reads its token meanwhile"
    )
    func TENANT12_bodiesOfOnePeer() async throws {
        let connections = Scale.pick(1000, full: 1000)
        let upstream = try await SilentUpstream()
        let directory = try scratchDirectory("waf-memory-budget")
        chmod(directory.path, 0o755)
        let proxy = directory.appendingPathComponent("proxy.sock").path
        let limit = try MemoryLimit(bytes: try MemoryLimit.shippedUnitLimit())
        let arguments = [
            "--proxy-listen", proxy, "--proxy-mode", "0666", "--proxy-upstream", upstream.origin, "--proxy-upstream-timeout-sec", "120",
            "--socket-max-connections-per-user", "2048", "--log-level", "warning",
        ]
        do {
            // Started inside the group, as systemd starts the unit: its start is charged too.
            try await withDaemon(daemon: arguments, executable: try limit.starting(Scale.daemon)) { _, daemon in
                _ = try await daemon.client.tokenReady(wait: .seconds(10))
                let pid = daemon.process.processIdentifier
                let before = ProcessReadings.residentKiB(pid) ?? 0
                let script = directory.appendingPathComponent("flood.py").path
                try Self.flood.write(toFile: script, atomically: true, encoding: .utf8)
                // Another uid (nobody) floods; the test's own uid (root) reads tokens meanwhile.
                let flood = try SpawnedProcess(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", "/usr/bin/python3", script, proxy, String(connections), "65536",
                        "20",
                    ], output: directory.appendingPathComponent("flood.log").path)
                let log = { (try? String(contentsOfFile: directory.appendingPathComponent("flood.log").path, encoding: .utf8)) ?? "" }
                #expect(await eventually(for: .seconds(120)) { !log().isEmpty }, "the flood opened its connections: \(log())")
                try await Task.sleep(for: .seconds(2))
                let latencies = probeLatencies(socket: daemon.socketPath, count: 500)
                let during = ProcessReadings.residentKiB(pid) ?? .max
                Scale.report(
                    "\(log().trimmingCharacters(in: .whitespacesAndNewlines)) connections of one uid posting 64 KiB to a silent upstream: RSS \(before / 1024) → \(during / 1024) MiB, peak \(limit.peakBytes.map { "\($0 >> 20) MiB" } ?? "?") of \(try MemoryLimit.shippedUnitLimit() >> 20) MiB, another uid's token reads p99 \(String(format: "%.2f", quantile(latencies, 0.99) * 1000)) ms, OOM kills \(limit.oomKills)"
                )
                #expect(limit.oomKills == 0 && daemon.process.isRunning, "the daemon is never killed for its peers' bytes")
                #expect(latencies.count == 500 && quantile(latencies, 0.99) < Scale.othersP99Bound, "another uid's reads go on")
                _ = await flood.stop()
            }
        } catch {
            await upstream.stop()
            throw error
        }
        await upstream.stop()
    }
}
