import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A `ProviderMachine` in a simulated world: virtual time, timers that fire when it passes, a
/// token service that answers when a step says so, callers who wait. It performs the machine's
/// actions the way the driver would, and shows every transition to an observer that checks the
/// rules, so a run of random steps is a run of the real decisions with nothing real in the way.
public struct ProviderWorld {
    /// One event the machine handled, with the state before and after and what it decided.
    public struct Transition {
        public let event: ProviderMachine.Event
        public let clock: ProviderMachine.Clock
        public let before: ProviderMachine
        public let after: ProviderMachine
        public let actions: [ProviderMachine.Action]
    }

    public struct OutstandingFetch: Sendable {
        public let id: ProviderMachine.ID
        public let request: WAFTokenFetchRequest
        public var cancelled: Bool
    }

    public private(set) var machine: ProviderMachine
    public private(set) var now = MonotonicInstant.origin
    public let wallOrigin: Date
    /// The settings a `.reload(i)` step applies.
    public let reloadVariants: [ProviderMachine.Settings]
    public private(set) var armed: [ProviderMachine.ID: MonotonicInstant] = [:]
    /// Fetches started and not yet reported back, cancelled or not, oldest first.
    public private(set) var fetches: [OutstandingFetch] = []
    public private(set) var snapshot: ProviderSnapshot?
    /// Callers who asked and have not been answered.
    public private(set) var waiting: Set<ProviderMachine.WaiterID> = []
    /// Callers who stopped waiting: the machine must never answer them.
    public private(set) var withdrawn: Set<ProviderMachine.WaiterID> = []
    /// How often each caller was answered.
    public private(set) var answers: [ProviderMachine.WaiterID: Int] = [:]
    /// What each caller asked for.
    public private(set) var requests: [ProviderMachine.WaiterID: ProviderMachine.Request] = [:]
    /// Which identity each token value was fetched or loaded for.
    public private(set) var tokenIdentities: [String: WAFTokenIdentity] = [:]
    private var random: SplitMix64
    private var issued = 0
    private var lastWaiter: UInt64 = 0

    public init(
        settings: ProviderMachine.Settings, reloadVariants: [ProviderMachine.Settings], seed: UInt64,
        wallOrigin: Date = Date(timeIntervalSince1970: 1_800_000_000)
    ) {
        machine = ProviderMachine(settings: settings)
        self.reloadVariants = reloadVariants
        self.wallOrigin = wallOrigin
        random = SplitMix64(seed: seed ^ 0xA5A5_5A5A)
    }

    public var clock: ProviderMachine.Clock {
        ProviderMachine.Clock(monotonic: now, wall: wallOrigin.addingTimeInterval(now.sinceOrigin.seconds), randomUnit: 1)
    }

    /// Starts the machine, with a restored token if given.
    public mutating func start(restored: WAFTokenProviderOptions.RestoredToken? = nil, observe: (Transition, ProviderWorld) -> Void) {
        if let restored { tokenIdentities[restored.value] = machine.currentSettings.configuration.identity }
        handle(.start(restored: restored), observe: observe)
    }

    /// Applies one step, handing every transition to `observe`.
    public mutating func apply(_ step: ModelStep, observe: (Transition, ProviderWorld) -> Void) {
        switch step {
        case .advance(let duration):
            advance(to: now + duration, observe: observe)
        case .fetchSucceeds:
            guard let fetch = fetches.first else { return }
            issued += 1
            let value = "tok-\(issued)"
            tokenIdentities[value] = fetch.request.configuration.identity
            fetches.removeFirst()
            handle(.fetchEnded(fetch.id, .success(value)), observe: observe)
        case .fetchFails(let index):
            guard let fetch = fetches.first else { return }
            fetches.removeFirst()
            handle(.fetchEnded(fetch.id, .failure(ModelStep.errors[index % ModelStep.errors.count])), observe: observe)
        case .lifecycle(let state):
            handle(.lifecycle(state), observe: observe)
        case .request(let request):
            lastWaiter += 1
            let id = ProviderMachine.WaiterID(lastWaiter)
            waiting.insert(id)
            requests[id] = request
            handle(.request(id, request), observe: observe)
        case .withdraw(let index):
            let ordered = waiting.sorted { $0.rawValue < $1.rawValue }
            guard !ordered.isEmpty else { return }
            let id = ordered[index % ordered.count]
            waiting.remove(id)
            withdrawn.insert(id)
            handle(.withdraw(id), observe: observe)
        case .load(let secondsAgo):
            load(clock.wall.addingTimeInterval(-secondsAgo), observe: observe)
        case .loadAbsurd(let index):
            load(ModelStep.absurdDates[index % ModelStep.absurdDates.count], observe: observe)
        case .reload(let index):
            guard !reloadVariants.isEmpty else { return }
            handle(.reconfigure(reloadVariants[index % reloadVariants.count]), observe: observe)
        case .stop:
            handle(.stop, observe: observe)
        }
    }

    /// Moves time to `target`, firing due timers in order, each at its own instant.
    public mutating func advance(to target: MonotonicInstant, observe: (Transition, ProviderWorld) -> Void) {
        while let (id, at) = armed.filter({ $0.value <= target }).min(by: { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }) {
            armed[id] = nil
            now = max(now, at)
            handle(.timerFired(id), observe: observe)
        }
        now = max(now, target)
    }

    private mutating func load(_ date: Date, observe: (Transition, ProviderWorld) -> Void) {
        issued += 1
        let value = "loaded-\(issued)"
        tokenIdentities[value] = machine.currentSettings.configuration.identity
        handle(.load(value, fetchedAt: date), observe: observe)
    }

    private mutating func handle(_ event: ProviderMachine.Event, observe: (Transition, ProviderWorld) -> Void) {
        var clock = clock
        clock.randomUnit = random.unit()
        let before = machine
        let actions = machine.handle(event, at: clock)
        for action in actions { perform(action) }
        observe(Transition(event: event, clock: clock, before: before, after: machine, actions: actions), self)
    }

    private mutating func perform(_ action: ProviderMachine.Action) {
        switch action {
        case .startFetch(let id, let request):
            fetches.append(OutstandingFetch(id: id, request: request, cancelled: false))
        case .cancelFetch(let id):
            if let index = fetches.firstIndex(where: { $0.id == id }) { fetches[index].cancelled = true }
        case .armTimer(let id, let at):
            armed[id] = at
        case .cancelTimer(let id):
            armed[id] = nil
        case .answer(let id, _):
            waiting.remove(id)
            answers[id, default: 0] += 1
        case .publish(let snapshot):
            self.snapshot = snapshot
        case .announce, .persist:
            break
        }
    }
}
