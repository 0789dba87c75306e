import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// A library the daemon loads on first use (libcrypto for a challenge's SHA-256, libssl for TLS
/// upstreams) missing mid-run: a broken installation. The process ends with 1, and what it started
/// does not outlive it (EXEC-5, HOOK-7), nor does exec's private token file.
@Suite("A library missing mid-run", .offPool, .serialized, .timeLimit(.minutes(2)))
struct LibraryFailureTests {
    @Test(
        "EXEC5: libcrypto missing at the first challenge ends exec with 1, the child's whole group (a grandchild that ignores SIGTERM too) and its private token directory with it"
    )
    func EXEC5_libraryMissingEndsTheGroup() async throws {
        let service = try ServiceProcess()
        let directory = try scratchDirectory("waf-library-failure")
        let marker = "653.\(getpid())"
        // A test that fails early leaves no group behind: the child ignores SIGTERM.
        defer {
            ProcessGroupTests.sweep(marker)
            if let pid = pid_t((try? String(contentsOfFile: directory.path + "/pid", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? "") {
                // Only while the pid still leads a group, as the child did: not a later process's.
                if getpgid(pid) == pid { kill(-pid, SIGKILL) }
            }
        }
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let state = directory.path + "/state"
        let common = [
            "--config", "/dev/null", "--application-integration-url", service.url, "--domain-name", "127.0.0.1", "--state-directory", state,
        ]
        // A fresh token in the state directory: exec starts its child without a challenge, so the
        // first use of libcrypto is the refresh below.
        let once = try await run(daemon, ["--once"] + common)
        #expect(once.status == 0, "\(once.stderr)")
        // The dynamic loader finds this empty file first: "file too short", as after a botched upgrade.
        let libraries = directory.path + "/lib", temporary = directory.path + "/tmp"
        for path in [libraries, temporary] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        #expect(FileManager.default.createFile(atPath: libraries + "/libcrypto.so.3", contents: Data()))
        var environment = ProcessInfo.processInfo.environment
        environment["LD_LIBRARY_PATH"] = libraries
        environment["TMPDIR"] = temporary
        let socket = directory.path + "/token.sock"
        // The child ignores SIGTERM, leaves a grandchild in its group that ignores it too, and
        // makes a directory of its own beside the token file.
        let child = """
            mkdir "$(dirname "$WAF_TOKEN_FILE")/own"; touch "$(dirname "$WAF_TOKEN_FILE")/own/file"; echo $$ > \(directory.path)/pid
            trap '' TERM; (trap '' TERM; sleep \(marker)) & while :; do sleep 0.05; done
            """
        let supervisor = try SpawnedProcess(
            daemon, ["exec"] + common + ["--socket-path", socket, "--", "/bin/sh", "-c", child], environment: environment,
            output: directory.path + "/stdout.log", errors: directory.path + "/stderr.log")
        #expect(await eventually(for: .seconds(20)) { ProcessGroupTests.running(marker).count == 1 }, "the child and its grandchild run")
        let pid = try #require(
            pid_t((try? String(contentsOfFile: directory.path + "/pid", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""))
        let privateDirectories = try FileManager.default.contentsOfDirectory(atPath: temporary)
        #expect(privateDirectories.count == 1, "exec's private directory: \(privateDirectories)")
        // The refresh fetches, the service challenges, and the solver's first SHA-256 needs libcrypto.
        _ = try? await curl(socket, "/v1/refresh", ["-X", "POST", "--max-time", "20"])
        // The child's group has exec's stop grace, 10 s, before SIGKILL.
        #expect(await supervisor.waitForExit(timeout: .seconds(40)) == 1, "a broken installation: 1")
        let stderr = (try? String(contentsOfFile: directory.path + "/stderr.log", encoding: .utf8)) ?? ""
        #expect(stderr.contains("cannot load libcrypto.so.3"), "one line saying which library: \(stderr)")
        // Killed, their ends are the kernel's to finish: looked for within a deadline.
        #expect(await eventually { ProcessGroupTests.running(marker).isEmpty }, "the grandchild that ignores SIGTERM was ended with the group")
        let stat = { (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "" }
        #expect(await eventually { stat().isEmpty || stat().contains(") Z ") }, "the child that ignores SIGTERM was ended: \(stat())")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "exec's private token directory was removed")
        await service.stop()
    }
}
