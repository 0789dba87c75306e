import WAFTokenCore
import WAFTokenCoreTestKit

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Many provider machines on one virtual clock against a model token service, so that a fleet's
/// load on the service can be read per second. Only the decisions are real (`ProviderMachine`);
/// time, timers and the service are simulated, which makes an hour of 10,000 daemons take seconds.
struct Fleet {
    /// The model token service: each fetch takes `latency`; while down, it fails at once.
    struct Service {
        var latency: Duration = .milliseconds(300)
        var down: Range<MonotonicInstant>?

        func isDown(at instant: MonotonicInstant) -> Bool { down?.contains(instant) == true }
    }

    private enum Work {
        case timer(ProviderMachine.ID)
        case fetchEnded(ProviderMachine.ID, success: Bool)
        case start(WAFTokenProviderOptions.RestoredToken?)
    }

    private struct Job: Comparable {
        let at: MonotonicInstant
        let sequence: UInt64
        let machine: Int
        let work: Work

        static func < (a: Job, b: Job) -> Bool { (a.at, a.sequence) < (b.at, b.sequence) }
        static func == (a: Job, b: Job) -> Bool { a.at == b.at && a.sequence == b.sequence }
    }

    let service: Service
    private(set) var machines: [ProviderMachine]
    /// Token-service requests (challenge requests: one per fetch attempt) per whole second.
    private(set) var requestsPerSecond: [Int] = []
    private(set) var now = MonotonicInstant.origin
    private var queue = Heap<Job>()
    private var armed: [Int: [ProviderMachine.ID: UInt64]] = [:]
    private var sequence: UInt64 = 0
    private var random: SplitMix64
    private let wallOrigin = Date(timeIntervalSince1970: 1_800_000_000)

    init(count: Int, settings: ProviderMachine.Settings, service: Service, seed: UInt64) {
        machines = Array(repeating: ProviderMachine(settings: settings), count: count)
        self.service = service
        random = SplitMix64(seed: seed)
    }

    /// Starts every machine at `at`, each with the restored token `restore` gives it.
    mutating func startAll(at instant: MonotonicInstant, restore: (Int) -> WAFTokenProviderOptions.RestoredToken?) {
        for index in machines.indices { push(at: instant, machine: index, .start(restore(index))) }
    }

    /// Replaces every machine by a new one started at `at` with the token the old one held, as a
    /// restart with a fresh state file does; the old ones' timers and fetches die with them.
    mutating func restartAll(at instant: MonotonicInstant, settings: ProviderMachine.Settings) {
        let wall = wallClock(instant)
        let saved = machines.map { machine in
            machine.status(at: .init(monotonic: instant, wall: wall, randomUnit: 1)).token.map { token in
                WAFTokenProviderOptions.RestoredToken(value: "restored", fetchedAt: token.fetchedAt)
            }
        }
        machines = Array(repeating: ProviderMachine(settings: settings), count: machines.count)
        armed = [:]
        queue = Heap()
        startAll(at: instant) { saved[$0] }
    }

    /// Runs every job due before `end`.
    mutating func run(until end: MonotonicInstant) {
        while let job = queue.peek(), job.at < end {
            queue.pop()
            now = job.at
            let event: ProviderMachine.Event
            switch job.work {
            case .timer(let id):
                guard armed[job.machine]?[id] == job.sequence else { continue }  // cancelled
                armed[job.machine]?[id] = nil
                event = .timerFired(id)
            case .fetchEnded(let id, let success):
                event = .fetchEnded(id, success ? .success("token") : .failure(.errorInvokingGetChallengeEndpoint("HTTP 503")))
            case .start(let restored):
                event = .start(restored: restored)
            }
            let clock = ProviderMachine.Clock(monotonic: now, wall: wallClock(now), randomUnit: random.unit())
            for action in machines[job.machine].handle(event, at: clock) { perform(action, machine: job.machine) }
        }
        now = max(now, end)
    }

    private mutating func perform(_ action: ProviderMachine.Action, machine: Int) {
        switch action {
        case .startFetch(let id, _):
            let second = Int(now.sinceOrigin.components.seconds)
            if requestsPerSecond.count <= second { requestsPerSecond += Array(repeating: 0, count: second - requestsPerSecond.count + 1) }
            requestsPerSecond[second] += 1
            let down = service.isDown(at: now)
            // A service that is down refuses at once; one that answers takes its latency, give or take 20%.
            let latency = down ? .milliseconds(1) : service.latency.scaled(by: 0.8 + 0.4 * random.unit())
            push(at: now + latency, machine: machine, .fetchEnded(id, success: !down))
        case .armTimer(let id, let at):
            let sequence = push(at: at, machine: machine, .timer(id))
            armed[machine, default: [:]][id] = sequence
        case .cancelTimer(let id):
            armed[machine]?[id] = nil
        case .cancelFetch, .answer, .announce, .persist, .publish:
            break
        }
    }

    @discardableResult
    private mutating func push(at instant: MonotonicInstant, machine: Int, _ work: Work) -> UInt64 {
        sequence += 1
        queue.push(Job(at: instant, sequence: sequence, machine: machine, work: work))
        return sequence
    }

    private func wallClock(_ instant: MonotonicInstant) -> Date {
        wallOrigin.addingTimeInterval(instant.sinceOrigin.seconds)
    }
}

/// A binary min-heap.
struct Heap<Element: Comparable> {
    private var items: [Element] = []

    func peek() -> Element? { items.first }

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, items[left] < items[smallest] { smallest = left }
            if right < items.count, items[right] < items[smallest] { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
