import Foundation
import WAFTestSupport

/// How hard the reliability suite pushes: bounded in `make test`, the full figures of the
/// hardening issue with `WAF_RELIABILITY=full` (`make test-reliability`).
enum Scale {
    static let full = ProcessInfo.processInfo.environment["WAF_RELIABILITY"] == "full"

    static func pick(_ bounded: Int, full figure: Int) -> Int { full ? figure : bounded }

    /// Others' p99 while the daemon is flooded: the goal, 10 ms, at full scale (a quiet machine,
    /// the release build); in `make test` (the debug build, beside other suites on a loaded CI
    /// machine) 50 ms, well above the 1–3 ms measured there and far below a stalled loop's seconds.
    static var othersP99Bound: Double { full ? 0.010 : 0.050 }

    /// The daemon as installed (the static release build, which `make test-reliability` makes
    /// first) at full scale; the debug build `make test` just made, bounded (a release build left
    /// from earlier could be older than the sources).
    static var daemon: String {
        full ? repositoryDirectory.appendingPathComponent(".build-static/release/waf-tokend").path : "waf-tokend"
    }

    /// One line of figures, as the suite's output reports them.
    static func report(_ line: String) {
        print("reliability: \(line)")
    }
}
