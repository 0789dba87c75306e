// How libdispatch runs a burst of quick callbacks when each gets a serial queue of its own, as
// the provider's callbacks did before CallbackRunner (TOK-6): the time, and the most threads the
// process had meanwhile. docs/decisions.md.
//
//   swiftc -O Benchmarks/callback-burst.swift -o /tmp/callback-burst && /tmp/callback-burst 100
import Dispatch
import Foundation

func threads() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1 }

let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 100
let peak = NSLock()
nonisolated(unsafe) var most = 0
Thread.detachNewThread {
    while true {
        let now = threads()
        peak.withLock { most = max(most, now) }
        usleep(200)
    }
}
let group = DispatchGroup()
let start = DispatchTime.now()
for _ in 0..<count {
    group.enter()
    DispatchQueue(label: "callback").async { group.leave() }
}
group.wait()
let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
print("\(count) callbacks, a queue each: \(String(format: "%.1f", milliseconds)) ms, at most \(peak.withLock { most }) threads")
sleep(6)
print("6 s later: \(threads()) threads")
