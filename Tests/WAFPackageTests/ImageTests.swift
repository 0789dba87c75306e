import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

/// The container image: a daemon container and a consumer container sharing the socket through a
/// volume, as two containers of a pod would.
@Suite("Container image", .offPool, .serialized)
struct ImageTests {
    @Test("a consumer container reads the token from the daemon container's socket; both stop; non-root, no shell")
    func sharedSocket() async throws {
        let image = try Packaging.image()
        let inspect = try await Packaging.podman(["image", "inspect", "--format", "{{.Config.User}} {{.Size}}", image])
        try #require(inspect.status == 0, "run make image first (make test-packages does): \(inspect.stderr)")
        #expect(inspect.stdout.hasPrefix("65532:65532 "), "runs as an unprivileged user")
        let volume = try scratchDirectory("waf-image-socket")
        chmod(volume.path, 0o777)
        let name = "waf-tokend-test-\(UUID().uuidString.prefix(8).lowercased())"
        let daemon = try await Packaging.podman(["run", "-d", "--name", name, "-v", "\(volume.path):/run/waf-tokend", image, "--demo"])
        try #require(daemon.status == 0, "\(daemon.stderr)")
        func cleanUp() async { _ = try? await Packaging.podman(["rm", "-f", "-t", "5", name]) }
        do {
            let consumer = try await Packaging.podman([
                "run", "--rm", "-v", "\(volume.path):/run/waf-tokend", "--entrypoint", "/usr/bin/waf-tokenctl", image, "token", "--wait", "30",
            ])
            #expect(consumer.status == 0, "\(consumer.stderr)")
            #expect(consumer.stdout.count > 40, "a token on stdout")
            let status = try await Packaging.podman([
                "run", "--rm", "-v", "\(volume.path):/run/waf-tokend", "--entrypoint", "/usr/bin/waf-tokenctl", image, "status",
            ])
            #expect(status.stdout.contains("token:     fresh"), "\(status.stdout)")
            let shell = try await Packaging.podman(["run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true"])
            #expect(shell.status != 0, "no shell in the image")
            let stop = try await Packaging.podman(["stop", "-t", "10", name])
            #expect(stop.status == 0)
            let exited = try await Packaging.podman(["inspect", "--format", "{{.State.ExitCode}}", name])
            #expect(exited.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "a graceful stop on SIGTERM")
            let logs = try await Packaging.podman(["logs", name])
            #expect(!(logs.stdout + logs.stderr).contains(consumer.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "no token in the logs")
        } catch {
            Issue.record(error)
        }
        await cleanUp()
        #expect(try await Packaging.podman(["ps", "-a", "--filter", "name=\(name)", "--format", "{{.Names}}"]).stdout.isEmpty)
    }
}
