import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokend exec … -- CMD` with the real daemon and a child that records what it reads and
/// which signals it gets (docs/delivery.md).
@Suite("waf-tokend exec", .offPool, .timeLimit(.minutes(2)))
struct ExecTests {
    /// A child that writes `start <token>` when it starts, `hup <token>` on each SIGHUP (the file
    /// read again), `term` on SIGTERM and then exits 0; its pid in `pid`. The traps come first, so
    /// a signal sent once `start` is logged finds them set.
    static func recorder(_ directory: URL) -> String {
        let log = directory.path + "/child.log"
        return """
            trap 'echo "hup $(cat "$WAF_TOKEN_FILE")" >> \(log)' HUP
            trap 'echo term >> \(log); exit 0' TERM
            echo $$ > \(directory.path)/pid; echo "start $(cat "$WAF_TOKEN_FILE")" >> \(log)
            while :; do sleep 0.05; done
            """
    }

    static func lines(_ directory: URL) -> [String] {
        ((try? String(contentsOfFile: directory.path + "/child.log", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// `waf-tokend exec` against `service`, its socket at `socket` when given.
    static func exec(
        _ service: ServiceProcess, _ directory: URL, socket: String? = nil, _ options: [String], _ command: [String]
    ) throws -> SpawnedProcess {
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        var arguments = ["exec", "--config", "/dev/null", "--application-integration-url", service.url, "--domain-name", "127.0.0.1"]
        if let socket { arguments += ["--socket-path", socket] }
        return try SpawnedProcess(
            daemon, arguments + options + ["--"] + command, output: directory.path + "/stdout.log", errors: directory.path + "/stderr.log")
    }

    @Test("EXEC1: the child starts with WAF_TOKEN_FILE holding the token, and its status is the supervisor's: a child that exits 3, exit 3")
    func EXEC1_statusAndFile() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-exec-status")
        // The child reads the file, and records its mode and its directory's (a private 0600 file
        // in a 0700 directory) and where it is.
        let child = """
            cat "$WAF_TOKEN_FILE" > \(directory.path)/read
            stat -c %a "$WAF_TOKEN_FILE" "$(dirname "$WAF_TOKEN_FILE")" > \(directory.path)/modes; echo "$WAF_TOKEN_FILE" > \(directory.path)/path
            exit 3
            """
        let supervisor = try Self.exec(service, directory, [], ["/bin/sh", "-c", child])
        #expect(await supervisor.waitForExit(timeout: .seconds(30)) == 3)
        let read = try String(contentsOfFile: directory.path + "/read", encoding: .utf8)
        #expect(try String(contentsOfFile: directory.path + "/modes", encoding: .utf8) == "600\n700\n", "owner-only file and directory")
        let path = try String(contentsOfFile: directory.path + "/path", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(access((path as NSString).deletingLastPathComponent, F_OK) != 0, "the private directory is removed at exit")
        #expect(try await service.mintedTokens().contains(read), "the child read a token the service issued")
        let stderr = (try? String(contentsOfFile: directory.path + "/stderr.log", encoding: .utf8)) ?? ""
        #expect(!stderr.contains(read), "the token is in no log line")
        await service.stop()
    }

    @Test("EXEC2: SIGHUP and SIGTERM go on to the child; after its clean end on SIGTERM the supervisor exits 0; no token in its argv or environment")
    func EXEC2_signalsForwarded() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-exec-signals")
        let supervisor = try Self.exec(service, directory, [], ["/bin/sh", "-c", Self.recorder(directory)])
        #expect(await eventually(for: .seconds(20)) { Self.lines(directory).first?.hasPrefix("start ") == true }, "started")
        let token = String(Self.lines(directory)[0].dropFirst(6))
        let child = try #require(
            Int32((try? String(contentsOfFile: directory.path + "/pid", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""))
        let environ = procFile("/proc/\(child)/environ") ?? ""
        let cmdline = procFile("/proc/\(child)/cmdline") ?? ""
        #expect(environ.contains("WAF_TOKEN_FILE=") && !environ.contains(token), "the file's path, never the token, in its environment")
        #expect(!cmdline.isEmpty && !cmdline.contains(token))
        supervisor.signal(SIGHUP)
        #expect(await eventually { Self.lines(directory).contains("hup \(token)") }, "\(Self.lines(directory))")
        supervisor.signal(SIGTERM)
        #expect(await supervisor.waitForExit(timeout: .seconds(20)) == 0)
        #expect(Self.lines(directory).last == "term")
        await service.stop()
    }

    @Test("EXEC3: on each new token, --on-token hup signals the child (which reads the new file) and restart starts it again with it")
    func EXEC3_onToken() async throws {
        let service = try ServiceProcess()
        for mode in ["hup", "restart"] {
            let directory = try scratchDirectory("waf-exec-\(mode)")
            let socket = directory.path + "/token.sock"
            let supervisor = try Self.exec(service, directory, socket: socket, ["--on-token", mode], ["/bin/sh", "-c", Self.recorder(directory)])
            #expect(await eventually(for: .seconds(20)) { Self.lines(directory).first?.hasPrefix("start ") == true }, "\(mode): started")
            let (code, body) = try await curl(socket, "/v1/refresh", ["-X", "POST", "-H", "Accept: text/plain"])
            #expect(code == 200, "the socket is served, as configured: \(body)")
            let fresh = body.trimmingCharacters(in: .newlines)
            let expected = mode == "hup" ? "hup \(fresh)" : "start \(fresh)"
            #expect(await eventually { Self.lines(directory).contains(expected) }, "\(mode): \(Self.lines(directory))")
            if mode == "restart" { #expect(Self.lines(directory).filter { $0 == "term" }.count == 1, "the old child was ended first") }
            supervisor.signal(SIGTERM)
            #expect(await supervisor.waitForExit(timeout: .seconds(20)) == 0)
        }
        await service.stop()
    }

    @Test("EXEC4: no first token within --first-token-timeout: 69, and the child never starts")
    func EXEC4_noFirstToken() async throws {
        let service = try ServiceProcess()
        await service.stop()
        let directory = try scratchDirectory("waf-exec-none")
        let started = ContinuousClock.now
        let supervisor = try Self.exec(service, directory, ["--first-token-timeout", "3"], ["/bin/sh", "-c", "touch \(directory.path)/ran"])
        #expect(await supervisor.waitForExit(timeout: .seconds(30)) == 69)
        // The provider's retries run out within a second here; the wait goes on to the limit.
        #expect(started.duration(to: .now) >= .seconds(3), "69 only once --first-token-timeout has passed")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/ran"))
    }

    @Test("EXEC2: SIGTERM before the first token ends exec at once with 143, and the child never starts")
    func EXEC2_stopBeforeTheFirstToken() async throws {
        let service = try ServiceProcess()
        await service.stop()
        let directory = try scratchDirectory("waf-exec-early-stop")
        let supervisor = try Self.exec(service, directory, ["--first-token-timeout", "60"], ["/bin/sh", "-c", "touch \(directory.path)/ran"])
        #expect(
            await eventually {
                (try? String(contentsOfFile: directory.path + "/stderr.log", encoding: .utf8))?.contains("token fetch failed") == true
            })
        supervisor.signal(SIGTERM)
        #expect(await supervisor.waitForExit(timeout: .seconds(10)) == 143, "ended on SIGTERM, not after the 60 s limit")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/ran"))
    }
}
