import CoreMetrics
import Synchronization

/// One series of `waf_tokend_proxy_upstream_seconds{provider, egress}`: a histogram whose record
/// is two atomic adds (its bucket, its sum), where swift-prometheus' takes a lock and walks every
/// bucket; the proxy records one per request, from each of its loops (docs/performance.md). Its
/// exposition is swift-prometheus' own, byte for byte, with the same buckets (its default ones
/// for durations): `UpstreamTimesTests` renders both.
final class UpstreamTimes: TimerHandler, @unchecked Sendable {
    static let name = "waf_tokend_proxy_upstream_seconds"
    /// The buckets' upper bounds in nanoseconds, and as the exposition writes them.
    static let bounds: [Int64] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000].map { $0 * 1_000_000 }
    static let boundLabels = bounds.map(seconds)

    /// `provider="…",egress="…"`, escaped.
    private let labels: [UInt8]
    /// Per bucket, the durations recorded in it and not in the one before (made cumulative for the
    /// exposition); the last, those above every bound. Atomics in memory of their own: an `Atomic`
    /// cannot be copied, so it cannot sit in an array. (Hence `@unchecked Sendable`: the pointer
    /// never changes, and what it points at is only ever touched atomically.)
    private let counts: UnsafeMutablePointer<Atomic<Int>>
    private let total = Atomic<Int64>(0)

    init(provider: String, egress: String) {
        var labels: [UInt8] = []
        for (index, (name, value)) in [("provider", provider), ("egress", egress)].enumerated() {
            if index > 0 { labels.append(UInt8(ascii: ",")) }
            labels += Array(name.utf8) + Array(#"=""#.utf8)
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): labels += Array(#"\\"#.utf8)
                case UInt8(ascii: "\""): labels += Array(#"\""#.utf8)
                case UInt8(ascii: "\n"): labels += Array(#"\n"#.utf8)
                default: labels.append(byte)
                }
            }
            labels.append(UInt8(ascii: "\""))
        }
        self.labels = labels
        counts = .allocate(capacity: Self.bounds.count + 1)
        for index in 0...Self.bounds.count { (counts + index).initialize(to: Atomic(0)) }
    }

    deinit {
        counts.deinitialize(count: Self.bounds.count + 1)
        counts.deallocate()
    }

    func recordNanoseconds(_ duration: Int64) {
        let value = max(0, duration)
        var index = 0
        while index < Self.bounds.count, Self.bounds[index] < value { index += 1 }
        counts[index].add(1, ordering: .relaxed)
        total.add(value, ordering: .relaxed)
    }

    /// The series' lines (`_bucket` per bound and `+Inf`, `_sum`, `_count`), after its family's
    /// `# TYPE` line, which the caller writes once.
    func emit(into buffer: inout [UInt8]) {
        var cumulative = 0
        for index in 0...Self.bounds.count {
            cumulative += counts[index].load(ordering: .relaxed)
            line(&buffer, "_bucket{", labels, #",le=""#, index < Self.bounds.count ? Self.boundLabels[index] : "+Inf", #""} "#, "\(cumulative)")
        }
        line(&buffer, "_sum{", labels, "} ", Self.seconds(total.load(ordering: .relaxed)))
        line(&buffer, "_count{", labels, "} ", "\(cumulative)")
    }

    private func line(_ buffer: inout [UInt8], _ suffix: String, _ labels: [UInt8], _ pieces: String...) {
        buffer += Array(Self.name.utf8) + Array(suffix.utf8) + labels
        for piece in pieces { buffer += Array(piece.utf8) }
        buffer.append(UInt8(ascii: "\n"))
    }

    /// Nanoseconds as swift-prometheus writes a `Duration`: whole seconds, a dot, the fraction
    /// without trailing zeros (`0` for none).
    static func seconds(_ nanoseconds: Int64) -> String {
        var fraction = String(nanoseconds % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.count > 1, fraction.last == "0" { fraction.removeLast() }
        return "\(nanoseconds / 1_000_000_000).\(fraction)"
    }
}
