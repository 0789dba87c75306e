import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A Debian container booted with a real systemd as its PID 1, for end-to-end tests of the units.
///
/// The root is made once with debootstrap and kept under the build folder; every boot runs on a
/// tmpfs overlay of it (`--volatile=overlay`), so nothing a test does lands in the cached root.
/// systemd-nspawn runs inside a mount namespace of its own with a tmpfs on /run (`unshare --mount
/// --propagation private`), so that it writes nothing into the host's /run; `--register=no
/// --keep-unit` keep it away from a host service manager.
public final class Container: @unchecked Sendable {
    private let nspawn: SpawnedProcess
    /// The container's PID 1 as the host sees it: the target of nsenter.
    public let leader: pid_t
    /// The cgroups the container lives in, one per systemd-managed hierarchy of the host.
    public let cgroups: [String]

    /// The hierarchies nspawn and the container's systemd write to: the one of a unified (v2)
    /// host, or the named systemd one and the unified one of a hybrid host.
    static var cgroupHierarchies: [String] {
        if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") { return ["/sys/fs/cgroup"] }
        return ["systemd", "unified"].map { "/sys/fs/cgroup/\($0)" }.filter { FileManager.default.fileExists(atPath: "\($0)/cgroup.procs") }
    }

    /// The Debian packages of the root: systemd, polkitd (which needs logind, from libpam-systemd)
    /// for the reload rule, the helpers a package's scripts call, and the
    /// libraries our binaries link (libpsl and its list, libyaml, libcrypto).
    static let packages = "systemd,systemd-sysv,dbus,libpam-systemd,polkitd,init-system-helpers,libsystemd0,libpsl5,publicsuffix,libyaml-0-2,libssl3"

    /// The cached root under `cache`, made on first use; named after its package list, so that a
    /// new list makes a new root. Suites that run at once (the package's and the restarts') wait
    /// on one lock for one debootstrap: two into the same scratch root corrupt each other's
    /// downloads ("Invalid Release signature").
    public static func root(in cache: URL) async throws -> URL {
        let root = cache.appendingPathComponent("root-" + String(packages.utf8.reduce(UInt32(5381)) { ($0 &* 33) &+ UInt32($1) }, radix: 16))
        if FileManager.default.fileExists(atPath: root.appendingPathComponent("usr/lib/systemd/systemd").path) { return root }
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let scratch = cache.appendingPathComponent("root.partial")
        // A root is renamed into place only once complete: an interrupted run leaves no half root.
        let made = try await run(
            "/usr/bin/bash",
            [
                "-c",
                """
                set -e
                # wget, under debootstrap, may leave a wget-log in the working directory: not the repository's.
                cd '\(cache.path)'
                exec 9> root.lock
                flock 9
                if [ -e '\(root.path)/usr/lib/systemd/systemd' ]; then exit 0; fi
                rm -rf '\(scratch.path)'
                # The mirror and proxy apt uses here, so that the root comes from where packages do.
                mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
                eval "$(apt-config shell proxy Acquire::http::Proxy 2>/dev/null || true)"
                if [ -n "${proxy:-}" ]; then export http_proxy="$proxy"; fi
                debootstrap --variant=minbase --include=\(packages) \
                    bookworm '\(scratch.path)' "${mirror:-http://deb.debian.org/debian}" > '\(cache.path)/debootstrap.log' 2>&1 \
                    || { tail -20 '\(cache.path)/debootstrap.log' >&2; exit 1; }
                mv '\(scratch.path)' '\(root.path)'
                """,
            ], timeout: .seconds(900))
        guard made.status == 0 else { throw ContainerError.debootstrap(made.stderr) }
        return root
    }

    /// Boots `root` with `bindings` (host path → container path, read-only) and waits until
    /// systemd reports the system running.
    public init(root: URL, name: String, bindings: [(String, String)], log: String) async throws {
        let binds = bindings.map { "--bind-ro=\($0.0):\($0.1)" }.joined(separator: " ")
        // With --keep-unit, nspawn and the container's systemd build their cgroups under the one
        // nspawn starts in, and leave some behind: start it in cgroups of its own, removed at the end.
        let cgroups = Self.cgroupHierarchies.map { "\($0)/\(name)" }
        let enter = cgroups.map { "mkdir -p \($0) && echo $$ > \($0)/cgroup.procs && " }.joined()
        let nspawn = try SpawnedProcess(
            "/usr/bin/unshare",
            [
                "--mount", "--propagation", "private", "/bin/sh", "-c",
                """
                \(enter)mount -t tmpfs -o mode=0755 tmpfs /run \
                && exec systemd-nspawn -D '\(root.path)' --register=no --keep-unit -b \
                    --volatile=overlay --machine=\(name) --console=passive \(binds)
                """,
            ], output: log, newSession: true)
        func fail(_ reason: String) async -> ContainerError {
            await nspawn.stop()
            await Self.remove(cgroups)
            return .boot(reason + "\n" + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? ""))
        }
        // The container's PID 1 is the nspawn child that has become systemd (before the exec it
        // is nspawn's own child process, in other namespaces).
        var leader: pid_t?
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(60)
        while leader == nil, nspawn.exitStatus == nil, clock.now < deadline {
            let children = try await run("/usr/bin/pgrep", ["-P", String(nspawn.pid), "-x", "systemd"])
            leader = children.stdout.split(separator: "\n").first.flatMap { pid_t($0) }
            if leader == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let leader else { throw await fail("systemd-nspawn started no systemd") }
        // Before its bus is up, systemctl answers "offline": ask again until it waits for real.
        var state = ""
        while clock.now < deadline + .seconds(60), nspawn.exitStatus == nil {
            let answer = try await run(
                "/usr/bin/nsenter", ["-t", String(leader), "-a", "systemctl", "is-system-running", "--wait"], timeout: .seconds(120))
            state = answer.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if ["running", "degraded"].contains(state) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard ["running", "degraded"].contains(state) else { throw await fail("systemd did not come up: \(state)") }
        self.nspawn = nspawn
        self.leader = leader
        self.cgroups = cgroups
    }

    /// Runs `script` with /bin/sh inside the container, in all its namespaces.
    @discardableResult
    public func sh(_ script: String, timeout: Duration = .seconds(60)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await run("/usr/bin/nsenter", ["-t", String(leader), "-a", "/bin/sh", "-c", script], timeout: timeout)
    }

    /// `systemctl poweroff`, then the container's cgroups removed; returns the exit status of
    /// systemd-nspawn (0 for a clean shutdown), or nil if it had to be killed after `timeout`.
    public func powerOff(timeout: Duration = .seconds(90)) async -> Int32? {
        _ = try? await sh("systemctl poweroff --no-block")
        let status = await nspawn.waitForExit(timeout: timeout)
        if status == nil {
            nspawn.signal(SIGKILL)
            _ = await nspawn.waitForExit()
        }
        await Self.remove(cgroups)
        return status
    }

    /// Kills whatever is left in the container's cgroups (a container whose nspawn died keeps
    /// running on its own), then removes them, deepest first.
    private static func remove(_ cgroups: [String]) async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        for cgroup in cgroups {
            while FileManager.default.fileExists(atPath: cgroup), clock.now < deadline {
                _ = try? await run(
                    "/usr/bin/sh",
                    [
                        "-c",
                        """
                        find '\(cgroup)' -name cgroup.procs -exec cat {} + | xargs -r kill -KILL 2>/dev/null
                        find '\(cgroup)' -depth -type d -exec rmdir {} + 2>/dev/null
                        """,
                    ])
                if FileManager.default.fileExists(atPath: cgroup) { try? await Task.sleep(for: .milliseconds(100)) }
            }
        }
    }
}

public enum ContainerError: Error, CustomStringConvertible {
    case debootstrap(String)
    case boot(String)

    public var description: String {
        switch self {
        case .debootstrap(let output): "debootstrap failed: \(output)"
        case .boot(let output): "the container did not boot: \(output)"
        }
    }
}
