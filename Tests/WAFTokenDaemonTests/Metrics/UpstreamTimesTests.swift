import CoreMetrics
import Foundation
import Prometheus
import Synchronization
import Testing
import WAFTestSupport
import WAFTestTraits

@testable import WAFTokenDaemon

/// `waf_tokend_proxy_upstream_seconds` outside the registry (UpstreamTimes): what a scrape reads
/// is what swift-prometheus wrote for the same timer, and no record is lost between loops.
@Suite("The proxy's upstream times", .offPool)
struct UpstreamTimesTests {
    /// At, below and above the bounds, none, and past the last.
    static let recorded: [Int64] = [0, 1, 4_999_999, 5_000_000, 5_000_001, 70_000_000, 999_999_999, 3_000_000_000, 10_000_000_000, 11_500_000_001]

    @Test(
        "the exposition is swift-prometheus' byte for byte: buckets, +Inf, sum, count, escaped labels",
        arguments: [("default", "direct"), ("pay", #"squid "east"\1:3128"#)])
    func sameAsPrometheus(provider: String, egress: String) {
        let registry = PrometheusCollectorRegistry()
        let timer = CoreMetrics.Timer(
            label: UpstreamTimes.name, dimensions: [("provider", provider), ("egress", egress)], preferredDisplayUnit: .seconds,
            factory: PrometheusMetricsFactory(registry: registry))
        let ours = UpstreamTimes(provider: provider, egress: egress)
        var expected = registry.emitToString()
        var written = Array("# TYPE \(UpstreamTimes.name) histogram\n".utf8)
        ours.emit(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == expected, "before any record")
        for value in Self.recorded {
            timer.recordNanoseconds(value)
            ours.recordNanoseconds(value)
        }
        expected = registry.emitToString()
        written = Array("# TYPE \(UpstreamTimes.name) histogram\n".utf8)
        ours.emit(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == expected)
    }

    @Test("two loops recording at once lose nothing: every record is in its bucket, the count and the sum")
    func concurrentRecords() async {
        let times = UpstreamTimes(provider: "default", egress: "direct")
        let values = (0..<100_000).map { Int64($0 % 7) * 3_000_000 }
        let done = Atomic<Int>(0)
        for _ in 0..<2 {
            startThread {
                for value in values { times.recordNanoseconds(value) }
                done.add(1, ordering: .releasing)
            }
        }
        #expect(await eventually(for: .seconds(30)) { done.load(ordering: .acquiring) == 2 }, "both threads ended within 30 s")
        var written: [UInt8] = []
        times.emit(into: &written)
        let text = String(decoding: written, as: UTF8.self)
        let series = #"{provider="default",egress="direct""#
        #expect(text.contains("\(UpstreamTimes.name)_count\(series)} 200000\n"), "\(text)")
        #expect(text.contains("\(UpstreamTimes.name)_bucket\(series),le=\"0.005\"} \(values.filter { $0 <= 5_000_000 }.count * 2)\n"), "\(text)")
        #expect(text.contains("\(UpstreamTimes.name)_sum\(series)} \(UpstreamTimes.seconds(values.reduce(0, +) * 2))\n"), "\(text)")
    }

    @Test("promtool reads the daemon's exposition with the histogram in it as valid")
    func promtoolChecks() async throws {
        let metrics = DaemonMetrics()
        let timer = metrics.upstreamTimer(provider: "default", egress: "direct")
        for value in Self.recorded { timer.recordNanoseconds(value) }
        let directory = try scratchDirectory("waf-upstream-times")
        let file = directory.appendingPathComponent("metrics.txt")
        try Data(metrics.exposition(statuses: [])).write(to: file)
        let checked = try await run("/bin/sh", ["-c", "promtool check metrics < '\(file.path)' 2>&1"])
        // 1: the text does not parse. 3: lint problems, of which the daemon's series have one, by
        // design: no HELP lines (its metrics have no help text; docs/monitoring.md describes them).
        let problems = checked.stdout.split(separator: "\n").filter { !$0.hasSuffix("no help text") }
        #expect((checked.status == 0 || checked.status == 3) && problems.isEmpty, "promtool (\(checked.status)): \(checked.stdout)")
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.components(separatedBy: "# TYPE \(UpstreamTimes.name) histogram").count == 2, "one TYPE line for the family")
        #expect(text.contains(#"waf_tokend_proxy_upstream_seconds_count{provider="default",egress="direct"} 10"#), "\(text)")
    }
}
