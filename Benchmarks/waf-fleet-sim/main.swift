import Foundation  // String(format:); a benchmark, not shipped
import WAFTokenCore

// The fleet on paper, in simulation: 10,000 providers on one virtual clock against a model token
// service, and the requests per second that service receives when the fleet starts together, when
// it restarts together with fresh state files, and when the service is down for ten minutes.
//
//     swift run -c release waf-fleet-sim [FLEET_SIZE=10000] [FLEET_CSV=directory]

let environment = ProcessInfo.processInfo.environment
let size = environment["FLEET_SIZE"].flatMap(Int.init) ?? 10_000
let csvDirectory = environment["FLEET_CSV"]
let configuration = try WAFConfiguration(
    applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/", domainName: "example.com")
let hour = MonotonicInstant(sinceOrigin: .seconds(3600))
let outage = hour..<(hour + .seconds(600))

func seconds(_ value: Int) -> MonotonicInstant { MonotonicInstant(sinceOrigin: .seconds(value)) }

/// A table row: the label left-aligned, the figures right-aligned.
func row(_ label: String, _ jitter: String, _ figures: String...) -> String {
    let widths = [11, 7, 11, 10]
    let cells = zip(figures, widths).map { String(repeating: " ", count: max(0, $1 - $0.count)) + $0 }
    return label.padding(toLength: 44, withPad: " ", startingAt: 0) + " " + jitter.padding(toLength: 6, withPad: " ", startingAt: 0)
        + cells.joined()
}

struct Window {
    let label: String
    let range: Range<Int>
}

func report(_ name: String, jitter: Bool, fleet: Fleet, windows: [Window]) {
    let series = fleet.requestsPerSecond
    for window in windows {
        let slice = window.range.map { $0 < series.count ? series[$0] : 0 }
        let peak = slice.max() ?? 0
        let at = window.range.lowerBound + (slice.firstIndex(of: peak) ?? 0)
        let mean = Double(slice.reduce(0, +)) / Double(max(1, slice.count))
        let busy = slice.filter { $0 > 100 }.count
        print(row(window.label, jitter ? "on" : "off", "\(peak)", "\(at)", String(format: "%.1f", mean), "\(busy)"))
    }
    if let csvDirectory {
        let lines = series.enumerated().map { "\($0.offset),\($0.element)" }.joined(separator: "\n")
        try? ("second,requests\n" + lines + "\n").write(
            toFile: "\(csvDirectory)/\(name)-jitter-\(jitter ? "on" : "off").csv", atomically: true, encoding: .utf8)
    }
}

let started = ContinuousClock.now
print(
    "\(size) providers, tokenRefreshDelaySec \(configuration.tokenRefreshDelaySec), maxRetryCount \(configuration.maxRetryCount), maxErrorTokenRefreshDelayMsec \(configuration.maxErrorTokenRefreshDelayMsec), service latency 300 ms ± 20%"
)
print(row("window (seconds of virtual time)", "jitter", "peak req/s", "at s", "mean req/s", "s > 100/s"))
for jitter in [false, true] {
    let settings = ProviderMachine.Settings(configuration: configuration, jitter: jitter)

    var cold = Fleet(count: size, settings: settings, service: .init(), seed: 1)
    cold.startAll(at: .origin) { _ in nil }
    cold.run(until: hour)
    report(
        "cold-start", jitter: jitter, fleet: cold,
        windows: [
            Window(label: "A. all start at 0, no state: the start", range: 0..<10),
            Window(label: "   the first refresh (290-310)", range: 290..<310),
            Window(label: "   the tenth refresh cycle (2700-3000)", range: 2700..<3000),
            Window(label: "   the last ten minutes (3000-3600)", range: 3000..<3600),
        ])

    var restart = cold
    restart.restartAll(at: hour, settings: settings)
    restart.run(until: hour + .seconds(1200))
    report(
        "restart", jitter: jitter, fleet: restart,
        windows: [
            Window(label: "B. all restart at 3600 with fresh state", range: 3600..<3610),
            Window(label: "   the 20 minutes after (3600-4800)", range: 3600..<4800),
        ])

    var down = Fleet(count: size, settings: settings, service: .init(down: outage), seed: 1)
    down.startAll(at: .origin) { _ in nil }
    down.run(until: hour + .seconds(1800))
    report(
        "outage", jitter: jitter, fleet: down,
        windows: [
            Window(label: "C. service down 3600-4200: during it", range: 3600..<4200),
            Window(label: "   back at 4200: the first minute", range: 4200..<4260),
            Window(label: "   the next refresh (4470-4520)", range: 4470..<4520),
            Window(label: "   later (4800-5400)", range: 4800..<5400),
        ])
}
print("simulated in \(ContinuousClock.now - started)")
