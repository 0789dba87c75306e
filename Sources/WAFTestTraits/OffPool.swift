import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The trait every suite wears: `@Suite("Retries", .offPool)`. It keeps tests off the Swift
/// concurrency pool and makes the pool's starvation a failure instead of a flake.
///
/// Swift Testing runs every test, synchronous ones too, on the concurrency pool, which has one
/// thread per core: two on the CI machine. A test that computes or polls for seconds holds a
/// thread, two of them hold the pool, and every `Task.sleep`, fetch and in-process daemon of the
/// other tests waits meanwhile (a 200 ms sleep once returned after 8.2 s). Under this trait:
///
/// - each test, and every task it starts, runs on threads of its own (`TestExecutor`), so what
///   it blocks or computes holds only those (how many tests run at once is Swift Testing's to
///   bound: `scripts/swift-test.sh` sets 16);
/// - `PoolWatcher` measures how late a 100 ms pool sleep wakes, and a test that ran while the pool
///   was blocked longer than 2 s fails, naming every test that was running then;
/// - a test that has not ended within its bound (its `.timeLimit`, else 5 minutes) stops the run
///   with a message naming it, instead of hanging it until CI gives up.
public struct OffPool: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public init() {}

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The suite's own scope, or a test that already has one (a nested suite with the trait).
        guard testCase != nil, !OffPool.inScope else { return try await function() }
        let watcher = PoolWatcher.shared
        let span = RunningTests.shared.begin(test.displayName ?? test.name)
        let bound = Self.bound(of: test)
        let alarm = BoundAlarm(test: test.displayName ?? test.name, span: span.id, bound: bound)
        defer {
            alarm.cancel()
            TestDiagnostics.forget(span.id)
        }
        try await OffPool.$inScope.withValue(true) {
            try await TestDiagnostics.$currentTest.withValue(span.id) {
                try await withTaskExecutorPreference(TestExecutor.shared) {
                    defer { RunningTests.shared.end(span) }
                    try await function()
                }
            }
        }
        for stall in watcher.stalls(during: span.interval) {
            let others = RunningTests.shared.names(during: stall.interval)
            Issue.record(
                Comment(
                    rawValue: """
                        the concurrency pool was blocked for \(Milliseconds(stall.length)) while this test ran: \
                        a 100 ms pool sleep woke that late. Running then: \(others.joined(separator: "; ")). A test that \
                        computes or blocks must not do it on the pool (see WAFTestTraits/OffPool.swift).
                        """))
        }
    }

    @TaskLocal static var inScope = false

    /// The test's own time limit, or its suite's, else five minutes; `WAF_TEST_BOUND_SECONDS`
    /// overrides it (the self-test of the report a stopped run prints, scripts/check-watchers.sh).
    static func bound(of test: Test) -> Duration {
        if let text = getenv("WAF_TEST_BOUND_SECONDS"), let seconds = Int64(String(cString: text)) { return .seconds(seconds) }
        let limits = test.traits.compactMap { ($0 as? TimeLimitTrait)?.timeLimit }
        return limits.min() ?? .seconds(300)
    }
}

extension Trait where Self == OffPool {
    /// See `OffPool`: the test runs on a thread of its own, watched for a blocked concurrency pool,
    /// within a bound of its own.
    public static var offPool: OffPool { OffPool() }
}

/// A duration as whole milliseconds, for messages.
struct Milliseconds: CustomStringConvertible {
    let duration: Duration
    init(_ duration: Duration) { self.duration = duration }
    var description: String { "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000) ms" }
}
