import Foundation
import WAFTestSupport

/// How hard the reliability suite pushes: bounded in `make test`, the full figures of the
/// hardening issue with `WAF_RELIABILITY=full` (`make test-reliability`).
enum Scale {
    static let full = ProcessInfo.processInfo.environment["WAF_RELIABILITY"] == "full"

    static func pick(_ bounded: Int, full figure: Int) -> Int { full ? figure : bounded }

    /// The daemon as installed (static release) when `make release` built it, else the debug build.
    static var daemon: String {
        let release = repositoryDirectory.appendingPathComponent(".build-static/release/waf-tokend").path
        return FileManager.default.isExecutableFile(atPath: release) ? release : "waf-tokend"
    }

    /// One line of figures, as the suite's output reports them.
    static func report(_ line: String) {
        print("reliability: \(line)")
    }
}
