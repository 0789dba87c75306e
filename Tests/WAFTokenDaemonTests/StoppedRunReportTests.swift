import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// A test that outlives its bound stops the run; what it leaves in CI's log must be enough to see
/// why. Enabled only by scripts/check-watchers.sh, which runs it alone with a 3 s bound and checks
/// that the run's output holds the daemon's last lines.
@Suite("A stopped run reports", .offPool)
struct StoppedRunReportTests {
    @Test("a test that outlives its bound prints its daemon's last lines", .enabled(if: getenv("WAF_BOUND_SELFTEST") != nil))
    func outlivingItsBound() async throws {
        try await withDaemon { _, daemon in
            _ = try await daemon.client.tokenReady(wait: .seconds(10))
            try await Task.sleep(for: .seconds(60))
        }
    }
}
