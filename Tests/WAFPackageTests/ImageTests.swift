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

/// `deploy/kubernetes/exec-wrapper.yaml` as a container runtime runs it: an application image of
/// busybox alone (static: no glibc, no loader, nothing of waf-tokend's), the waf-tokend image
/// mounted as an image volume, and the manifest's command around a child that reads its token.
@Suite("waf-tokend exec around an unmodified image", .offPool, .serialized)
struct ExecWrapperImageTests {
    /// A busybox-only image, built once from Debian's busybox-static.
    static func busyboxImage() async throws -> String {
        let name = "localhost/waf-test-busybox:1"
        if try await Packaging.podman(["image", "exists", name]).status == 0 { return name }
        let work = try scratchDirectory("waf-busybox-image")
        try FileManager.default.copyItem(atPath: "/bin/busybox", toPath: work.appendingPathComponent("busybox").path)
        try """
        FROM scratch
        COPY busybox /bin/busybox
        RUN ["/bin/busybox", "--install", "-s", "/bin"]
        """.write(to: work.appendingPathComponent("Containerfile"), atomically: true, encoding: .utf8)
        let built = try await Packaging.podman(["build", "--quiet", "-t", name, work.path], timeout: .seconds(300))
        try #require(built.status == 0, "building the busybox image (busybox-static installed?): \(built.stderr)")
        return name
    }

    @Test("EXEC1: the manifest's command runs the child with WAF_TOKEN_FILE (0600, a token in it, none in its environment); its status 3 is the exit")
    func EXEC1_manifestWrapsAnUnmodifiedImage() async throws {
        let image = try Packaging.image()
        let app = try await Self.busyboxImage()
        let manifest = try KubernetesManifestTests.load("exec-wrapper.yaml")
        let container = try #require(manifest["spec"]?["containers"]?.items.first)
        let command = container["command"]?.items.compactMap(\.text) ?? []
        let mount = try #require(container["volumeMounts"]?.items.first { $0["name"]?.text == "waf-tokend" }?["mountPath"]?.text)
        try #require(command.last == "--", "the manifest's command ends with --, its args are the application's")
        let domain = try #require(container["env"]?.items.first { $0["name"]?.text == "WAF_TOKEND_DOMAIN_NAME" }?["value"]?.text)
        let service = try ServiceProcess(["--token-domain", domain])
        defer { Task { await service.stop() } }
        // The manifest's environment, with the local token service (on the host's loopback) in
        // place of AWS's.
        var environment: [String] = []
        for variable in container["env"]?.items ?? [] {
            let name = try #require(variable["name"]?.text)
            let value = name == "WAF_TOKEND_APPLICATION_INTEGRATION_URL" ? service.url : try #require(variable["value"]?.text)
            environment += ["-e", "\(name)=\(value)"]
        }
        let child = """
            stat -c 'mode %a' "$WAF_TOKEN_FILE"; echo "bytes $(wc -c < "$WAF_TOKEN_FILE")"
            env | grep -c "$(cat "$WAF_TOKEN_FILE")" | sed 's/^/environment /'
            exit 3
            """
        let run = try await Packaging.podman(
            [
                "run", "--rm", "--network", "host", "--user", "65532:65532", "--read-only", "--tmpfs", "/tmp:mode=1777",
                "--mount", "type=image,source=\(image),destination=\(mount)",
            ] + environment + ["--entrypoint", command[0], app] + command.dropFirst() + ["/bin/sh", "-c", child],
            timeout: .seconds(120))
        #expect(run.status == 3, "the child's status is the exit: \(run.stderr)")
        #expect(run.stdout.contains("mode 600"), "\(run.stdout)")
        let bytes = run.stdout.split(separator: "\n").first { $0.hasPrefix("bytes ") }.flatMap { Int($0.dropFirst(6)) } ?? 0
        #expect(bytes > 40, "a token in the file: \(run.stdout)")
        #expect(run.stdout.contains("environment 0"), "no token in the child's environment: \(run.stdout)")
        #expect(try await service.mintedTokens().count >= 1)
    }
}
