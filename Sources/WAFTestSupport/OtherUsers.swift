import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `nobody`: a uid no test runs as, for what another local user may and may not do.
public let nobody: UInt32 = 65534

/// `curl --unix-socket` as another user and group (`setpriv`), with no supplementary groups unless
/// `groups` names some: SO_PEERCRED and the group database are all the daemon sees.
public func curlAs(
    uid: UInt32, gid: UInt32? = nil, groups: [UInt32] = [], _ socket: String, _ path: String, _ options: [String] = [], maxTime: Int = 15
) async throws -> (code: Int, body: String) {
    let identity =
        ["--reuid=\(uid)", "--regid=\(gid ?? uid)"]
        + (groups.isEmpty ? ["--clear-groups"] : ["--groups=\(groups.map(String.init).joined(separator: ","))"])
    let result = try await run(
        "/usr/bin/setpriv",
        identity + ["/usr/bin/curl", "-s", "--max-time", String(maxTime), "-w", "\n%{http_code}", "--unix-socket", socket] + options + [
            "http://localhost\(path)"
        ])
    var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.popLast() ?? "") ?? 0
    return (code, lines.joined(separator: "\n"))
}

/// Whether another user (`setpriv`, with only `groups` besides its own) can read `path`.
public func canRead(_ path: String, uid: UInt32, groups: [UInt32] = []) async throws -> Bool {
    let identity =
        ["--reuid=\(uid)", "--regid=\(uid)"] + (groups.isEmpty ? ["--clear-groups"] : ["--groups=\(groups.map(String.init).joined(separator: ","))"])
    return try await run("/usr/bin/setpriv", identity + ["/bin/cat", path]).status == 0
}
