import Foundation

/// Every scratch directory and file of one test process lives under `/tmp/waf-tests-<pid>`, which
/// goes when the process exits: a run of the suites starts and kills thousands of daemons, and
/// their directories must not pile up in `/tmp`. `WAF_KEEP_SCRATCH=1` keeps it, for reading what
/// a failed test's daemon logged.
public let scratchRoot: URL = {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("waf-tests-\(getpid())")
    try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    if ProcessInfo.processInfo.environment["WAF_KEEP_SCRATCH"] != "1" {
        atexit { try? FileManager.default.removeItem(at: scratchRoot) }
    }
    return root
}()

/// A path under `scratchRoot` for a file or directory of the caller's own: `prefix-XXXXXXXX`.
public func scratchPath(_ prefix: String) -> URL {
    scratchRoot.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
}

/// A new directory under `scratchRoot`: `prefix-XXXXXXXX`.
public func scratchDirectory(_ prefix: String) throws -> URL {
    let directory = scratchPath(prefix)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}
