import Foundation
import Testing
import WAFJSON
import WAFTestSupport

#if canImport(Glibc)
import Glibc
import WAFTestTraits
#endif

/// Socket activation with systemd-socket-activate, which passes sockets as systemd does
/// (`LISTEN_FDS`, `LISTEN_FDNAMES`): the API socket alone, named sockets for several listeners,
/// and a socket of the wrong kind.
@Suite("socket activation", .offPool, .timeLimit(.minutes(3)))
struct SocketActivationTests {
    @Test("socket activation: the passed socket is served, and its path is neither created nor removed")
    func socketActivation() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-activate")
        let socket = directory.appendingPathComponent("activated.sock").path
        let stderr = directory.appendingPathComponent("stderr.log").path
        // systemd-socket-activate closes every descriptor it did not open: see SpawnedProcess.
        let activator = try SpawnedProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "-l", socket, productsDirectory.appendingPathComponent("waf-tokend").path, "--config", "/dev/null",
                "--application-integration-url", service.url, "--domain-name", "127.0.0.1",
                "--socket-path", directory.appendingPathComponent("configured.sock").path,
            ], output: stderr)
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) })

        // The first connection starts the daemon on the socket systemd-socket-activate holds. Its
        // path exists from bind on, a moment before it listens: a connection refused then is tried
        // again (curl's code 0), within 10 s.
        var first = try await curl(socket, "/v1/token?wait=10")
        let deadline = ContinuousClock.now + .seconds(10)
        while first.code == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            first = try await curl(socket, "/v1/token?wait=10")
        }
        #expect(first.code == 200, "\(first.body)")
        #expect(json(first.body)?["value"]?.string?.isEmpty == false)
        #expect(try await curl(socket, "/v1/status").code == 200)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("configured.sock").path))
        #expect(await activator.stop() == 0, "SIGTERM stops the activated daemon gracefully")
        let log = try String(contentsOfFile: stderr, encoding: .utf8)
        #expect(log.contains("activated=true"))
        #expect(FileManager.default.fileExists(atPath: socket), "the passed socket's path is left to whoever made it")
        await service.stop()
    }

    @Test("a passed socket that is not a listening stream socket is refused with exit 71")
    func socketActivationOfTheWrongKind() async throws {
        let directory = try scratchDirectory("waf-activate")
        let socket = directory.appendingPathComponent("datagram.sock").path
        let output = directory.appendingPathComponent("output.log").path
        let activator = try SpawnedProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "--datagram", "-l", socket, productsDirectory.appendingPathComponent("waf-tokend").path,
                "--config", "/dev/null", "--application-integration-url", "https://x.example.com/a/b/", "--domain-name", "example.com",
            ], output: output)
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) })
        // A datagram socket is activated by its first datagram.
        let sender = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socket.utf8.enumerated() { raw[index] = byte }
        }
        let sent = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(sender, "x", 1, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        Glibc.close(sender)
        #expect(sent == 1)
        #expect(await activator.waitForExit() == 71)
        let log = try String(contentsOfFile: output, encoding: .utf8)
        #expect(log.contains("none of the 1 sockets systemd passed is a listening stream socket"), "\(log)")
    }

    @Test(
        "named sockets: api is the API socket, a proxy's is served where its address matches, one that matches nothing is logged and closed; READY=1 and the watchdog (WATCHDOG_PID ours) meanwhile, all without loading libsystemd"
    )
    func namedSockets() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-activate")
        let api = try ListeningSocket(unix: directory.appendingPathComponent("api.sock").path)
        let extra = try ListeningSocket(unix: directory.appendingPathComponent("extra.sock").path)
        // Bound here on port 0 and passed, as systemd passes a socket unit's: the port is known
        // before the daemon starts, and nothing else can take it meanwhile.
        let proxy = try ListeningSocket(tcp: "127.0.0.1")
        let stderr = directory.appendingPathComponent("stderr.log").path
        let notify = try NotifySocket(abstract: false)
        defer { notify.close() }
        // LISTEN_PID and WATCHDOG_PID must be the daemon's own pid, as systemd sets them: the shell
        // learns it and execs the daemon in its place.
        let activated = try SpawnedProcess(
            "/bin/sh",
            [
                "-c", #"LISTEN_PID=$$ WATCHDOG_PID=$$ exec "$0" "$@""#, productsDirectory.appendingPathComponent("waf-tokend").path, "--config",
                "/dev/null",
                "--application-integration-url", service.url, "--domain-name", "127.0.0.1",
                "--socket-path", directory.appendingPathComponent("configured.sock").path,
                "--proxy-listen", proxy.address, "--proxy-allowed-users", "root", "--proxy-upstream", service.origin,
            ],
            environment: ProcessInfo.processInfo.environment.merging([
                "LISTEN_FDS": "3", "LISTEN_FDNAMES": "api:proxy-default:stray", "NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "2000000",
                "LD_DEBUG": "files",
            ]) { $1 },
            output: stderr, descriptors: [api.descriptor, proxy.descriptor, extra.descriptor])

        #expect(try await curl(api.address, "/v1/token?wait=10").code == 200, "the socket named api is the API socket")
        // The proxy's address is the passed TCP socket's: served on it (binding it again would fail).
        let proxied = try await curlURL("http://\(proxy.address)/protected/x")
        #expect(proxied.code == 200, "\(proxied.body)")
        let log = { (try? String(contentsOfFile: stderr, encoding: .utf8)) ?? "" }
        #expect(
            await eventually { log().contains("matches no configured listener") && log().contains("name=stray") },
            "the stray socket is logged: \(log())")
        #expect(log().contains("activated=true"), "\(log())")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("configured.sock").path))
        #expect(await notify.wait { $0.fields["READY"] == "1" } != nil, "READY=1")
        #expect(await notify.wait { $0.fields["WATCHDOG"] == "1" } != nil, "the watchdog pinged: WATCHDOG_PID is the daemon's")
        #expect(await activated.stop() == 0)
        #expect(log().contains("libc.so.6"), "the loader's report")
        #expect(!log().contains("libsystemd.so.0"), "socket activation, READY=1 and the watchdog are spoken, not loaded")
        await service.stop()
    }

    @Test("TENANT11: a TCP socket passed under the name api is never the API socket: logged and closed; the configured path serves")
    func TENANT11_tcpNamedAPI() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-activate-tcp-api")
        var tcp: ListeningSocket? = try ListeningSocket(tcp: "127.0.0.1")
        let address = tcp!.address
        let configured = directory.appendingPathComponent("configured.sock").path
        let stderr = directory.appendingPathComponent("stderr.log").path
        let activated = try SpawnedProcess(
            "/bin/sh",
            [
                "-c", #"LISTEN_PID=$$ exec "$0" "$@""#, productsDirectory.appendingPathComponent("waf-tokend").path, "--config", "/dev/null",
                "--application-integration-url", service.url, "--domain-name", "127.0.0.1", "--socket-path", configured,
            ],
            environment: ProcessInfo.processInfo.environment.merging(["LISTEN_FDS": "1", "LISTEN_FDNAMES": "api"]) { $1 },
            output: stderr, descriptors: [tcp!.descriptor])
        // The daemon's copy is all that is left: once it closes it, nothing listens there.
        tcp = nil
        let log = { (try? String(contentsOfFile: stderr, encoding: .utf8)) ?? "" }
        #expect(await eventually { log().contains("matches no configured listener") }, "\(log())")
        // The passed socket is refused before the configured one is bound: wait for the latter.
        #expect(await eventually { log().contains("serving the token API") }, "\(log())")
        #expect(try await curl(configured, "/v1/token?wait=10").code == 200, "the configured socket serves the API")
        let overTCP = try await curlURL("http://\(address)/v1/token", ["--max-time", "2"])
        #expect(overTCP.code == 0, "nothing is served on the passed TCP socket: \(overTCP)")
        #expect(await activated.stop() == 0)
        await service.stop()
    }
}
