import Foundation
import WAFTestSupport

/// What `make deb` and `make image` made, for the tests of this target (`make test-packages`
/// builds both first).
enum Packaging {
    static let version = repositoryDirectory.appendingPathComponent("deploy/debian/changelog").path

    /// The version at the top of deploy/debian/changelog.
    static func packageVersion() throws -> String {
        let changelog = try String(contentsOfFile: version, encoding: .utf8)
        return String(changelog.prefix { $0 != "\n" }.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" })
    }

    static func deb(_ version: String) -> URL {
        repositoryDirectory.appendingPathComponent("out/waf-tokend_\(version)_amd64.deb")
    }

    static func image() throws -> String { "localhost/waf-tokend:\(try packageVersion())" }

    static let containersConf = repositoryDirectory.appendingPathComponent("deploy/container/containers.conf").path

    /// `podman ARGUMENTS` with the project's containers.conf.
    static func podman(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runDetached("/usr/bin/env", ["CONTAINERS_CONF=\(containersConf)", "podman"] + arguments, timeout: timeout)
    }

    /// Every path in the image, from `podman export` of a container made (not started) from it.
    static func imageFiles() async throws -> Set<String> {
        let created = try await podman(["create", try image()])
        guard created.status == 0 else { throw PackagingError.podman(created.stderr) }
        let id = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        defer { Task { _ = try? await podman(["rm", id]) } }
        let listed = try await runDetached("/usr/bin/bash", ["-c", "CONTAINERS_CONF='\(containersConf)' podman export \(id) | tar -t"])
        guard listed.status == 0 else { throw PackagingError.podman(listed.stderr) }
        return Set(listed.stdout.split(separator: "\n").map { "/" + String($0.drop { $0 == "." || $0 == "/" }).trimmingSuffix("/") })
    }
}

enum PackagingError: Error {
    case podman(String)
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
