import NIOConcurrencyHelpers

/// What a test's helpers can say about the processes they started, printed when the test outlives
/// its bound (`BoundAlarm`) or fails by throwing: a failure in CI is then diagnosed from its log
/// alone, without the scratch directories of a machine that is gone.
///
/// A helper that starts a daemon attaches a closure that reads the daemon's last output lines;
/// it belongs to the test that was running when it was attached (a task-local set by `OffPool`),
/// and is forgotten when that test ends.
public enum TestDiagnostics {
    private static let attached = NIOLockedValueBox<[Int: [@Sendable () -> String]]>([:])

    /// The test now running on this task, set by `OffPool` around each test.
    @TaskLocal static var currentTest: Int?

    /// Adds `describe` to what is printed if the current test outlives its bound; nothing outside
    /// a test that wears `.offPool`.
    public static func attach(_ describe: @escaping @Sendable () -> String) {
        guard let test = currentTest else { return }
        attached.withLockedValue { $0[test, default: []].append(describe) }
    }

    /// What every helper of `test` has to say, one block each.
    static func report(for test: Int) -> String {
        let closures = attached.withLockedValue { $0[test] ?? [] }
        return closures.map { $0() }.joined(separator: "\n")
    }

    /// Prints what the helpers of the current test have to say (a test that failed by throwing).
    public static func printReport(reason: String) {
        guard let test = currentTest else { return }
        let report = report(for: test)
        guard !report.isEmpty else { return }
        print("\(reason)\n\(report)")
    }

    static func forget(_ test: Int) {
        _ = attached.withLockedValue { $0.removeValue(forKey: test) }
    }
}

/// The last `count` lines of `text`, each indented, for a diagnostic block.
public func lastLines(_ text: String, _ count: Int = 30) -> String {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(count)
    return lines.map { "    | \($0)" }.joined(separator: "\n")
}
