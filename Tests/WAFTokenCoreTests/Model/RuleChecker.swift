import WAFTokenCoreTestKit

@testable import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Checks the rules on every transition of a `ProviderWorld`, with an oracle of its own for the
/// retry position (RET-1, RET-8) and for when the token must read fresh (TOK-7). Violations are
/// collected as lines a person can read next to the step list.
struct RuleChecker {
    private(set) var violations: [String] = []
    /// Failed attempts since the sequence (re)started, as the rules count them.
    private var sequence = 0
    private var restartAfterAttempt = false
    /// Active, with background refresh, since a token was fetched, and no failure since: TOK-7 says
    /// the token must not read stale.
    private var clean = false

    mutating func observe(_ t: ProviderWorld.Transition, world: ProviderWorld) {
        let before = t.before, after = t.after, now = t.clock.monotonic
        func fail(_ message: String) { violations.append("at \(now) on \(describe(t.event)): \(message)") }

        // TOK-4: never two fetches, cancelled ones included, until they have reported back.
        if world.fetches.count > 1 { fail("TOK-4: \(world.fetches.count) fetches in flight") }

        // TOK-5: a failure never replaces or clears the cached token.
        if case .fetchEnded(_, .failure) = t.event, before.cached?.token != after.cached?.token {
            fail("TOK-5: a failed fetch changed the cached token")
        }

        let counted = after.consecutiveFailures == before.consecutiveFailures + 1
        let adopted = after.cached?.token != before.cached?.token && after.cached?.origin == .fetched && after.cached != nil
        updateSequence(t, counted: counted, adopted: adopted)

        // TOK-1: whoever hears of this event (answers, observers, on other threads) finds its
        // outcome in getToken(): the snapshot is published before anyone is told.
        if let told = t.actions.firstIndex(where: \.tellsSomeone),
            let published = t.actions.firstIndex(where: \.isPublish), published > told
        {
            fail("TOK-1: \(t.actions[told]) performed before the snapshot was published")
        }

        for action in t.actions {
            switch action {
            case .answer(let id, let answer):
                if (world.answers[id] ?? 0) > 1 { fail("TOK-6: waiter \(id.rawValue) answered twice") }
                if world.withdrawn.contains(id) { fail("TENANT-12: waiter \(id.rawValue) answered after it stopped waiting") }
                checkKind(answer, id: id, world: world, fail: fail)
            case .startFetch:
                // LIFE-2: no request of its own while inactive: only for someone who asked.
                let explicit = !after.waiters.isEmpty || (!after.backgroundRefresh && after.keepTryingOnDemand)
                if after.backgroundRefresh && !after.isActive && !explicit { fail("LIFE-2: a fetch of its own while inactive") }
                if !after.backgroundRefresh && !explicit { fail("TOK-2: an on-demand fetch nobody asked for") }
            case .armTimer(let id, let at):
                checkWait(id: id, at: at, t, counted: counted, adopted: adopted, fail: fail)
            case .persist(let record):
                if record.identity != after.identity { fail("persisted under \(record.identity), current \(after.identity)") }
                if let token = record.token, world.tokenIdentities[token.value] != record.identity {
                    fail("persisted a token of \(world.tokenIdentities[token.value].map(\.description) ?? "nobody") under \(record.identity)")
                }
            default:
                break
            }
        }
        checkLoad(t, fail: fail)
        updateClean(t, adopted: adopted, counted: counted)
    }

    /// What must hold between events, at the world's current instant.
    mutating func checkState(_ world: ProviderWorld) {
        let machine = world.machine
        if clean, machine.backgroundRefresh, machine.isActive, let snapshot = world.snapshot,
            let cached = snapshot.cachedToken(at: world.now), cached.stale
        {
            violations.append("at \(world.now): TOK-7: active, the service answering, and the token reads stale (age \(cached.age))")
        }
        if machine.stopped {
            if !world.armed.isEmpty { violations.append("after stop: \(world.armed.count) timers still armed") }
            if world.fetches.contains(where: { !$0.cancelled }) { violations.append("after stop: a fetch not cancelled") }
            if !world.waiting.isEmpty { violations.append("after stop: \(world.waiting.count) callers never answered") }
        }
    }

    // MARK: Oracles

    private mutating func updateSequence(_ t: ProviderWorld.Transition, counted: Bool, adopted: Bool) {
        let before = t.before, after = t.after
        if counted {
            sequence = restartAfterAttempt ? 1 : sequence + 1
            restartAfterAttempt = false
        }
        if after.consecutiveFailures == 0 && before.consecutiveFailures > 0 || adopted {
            sequence = 0
            restartAfterAttempt = false
        }
        switch t.event {
        case .request:
            if let fetch = before.fetch, !before.stopped, after.waiters.count > before.waiters.count {
                if !fetch.cancelled { restartAfterAttempt = true }
            } else if before.fetch == nil, after.fetch != nil {
                sequence = 0  // RET-8: a full budget for an explicit request
            }
        case .reconfigure where before.identity != after.identity:
            sequence = 0
            restartAfterAttempt = false
        default:
            break
        }
        if before.paused && !after.paused && before.fetch == nil && after.fetch != nil {
            sequence = 0  // LIFE-4: back from a pause (a lifecycle change or a new profile), a fresh start
        }
    }

    private mutating func updateClean(_ t: ProviderWorld.Transition, adopted: Bool, counted: Bool) {
        let after = t.after
        switch t.event {
        case .fetchEnded(_, .success) where adopted:
            clean = after.isActive && after.backgroundRefresh
        case .lifecycle, .reconfigure, .load, .stop:
            if !after.isActive || !after.backgroundRefresh || after.cached?.token != t.before.cached?.token
                || after.stopped || after.identity != t.before.identity
            {
                clean = false
            }
        default:
            if counted || !after.isActive { clean = false }
        }
    }

    // MARK: Checks

    private func checkWait(
        id: ProviderMachine.ID, at: MonotonicInstant, _ t: ProviderWorld.Transition, counted: Bool, adopted: Bool,
        fail: (String) -> Void
    ) {
        let after = t.after, now = t.clock.monotonic, configuration = after.configuration
        if after.pauseTimer?.id == id {
            guard let since = after.inactiveSince, at == since + configuration.tokenRefreshDelay + .nanoseconds(1) else {
                return fail("LIFE-3: pause armed for \(at), not just after tokenRefreshDelaySec of inactivity")
            }
            return
        }
        let wait = at - now
        let jitter = after.settings.jitter
        if adopted {
            // RET-6, RET-7: the next refresh, tokenRefreshDelaySec after the success, only shortened.
            let maximum = configuration.tokenRefreshDelay
            let ok = jitter ? wait >= maximum.scaled(by: 0.9) && wait <= maximum : wait == maximum
            if !ok { fail("RET-6/7: refresh wait \(wait), delay \(maximum), jitter \(jitter)") }
        } else if counted {
            let schedule = RetrySchedule(configuration: configuration, jitter: jitter, randomUnit: 1)
            if sequence <= configuration.maxRetryCount {
                let expected = schedule.backoff(retry: sequence)
                if wait != expected { fail("RET-1: retry \(sequence) waits \(wait), not \(expected)") }
            } else {
                let maximum = configuration.maxErrorTokenRefreshDelay
                let ok = jitter ? wait >= maximum.scaled(by: 0.5) && wait <= maximum : wait == maximum
                if !ok { fail("RET-2/7: error-phase wait \(wait), maximum \(maximum), jitter \(jitter)") }
            }
        }
    }

    private func checkKind(_ answer: ProviderMachine.Answer, id: ProviderMachine.WaiterID, world: ProviderWorld, fail: (String) -> Void) {
        let onDemandAnswer = if case .onDemand = answer { true } else { false }
        if onDemandAnswer != (world.requests[id] == .onDemand) { fail("OBJ-4: an answer of the wrong kind for waiter \(id.rawValue)") }
    }

    private func checkLoad(_ t: ProviderWorld.Transition, fail: (String) -> Void) {
        guard case .load = t.event, let loaded = t.after.cached, loaded.token != t.before.cached?.token else { return }
        if loaded.untrustedTime && !t.after.freshness.alwaysStale { fail("TOK-8: an untrusted fetch time and the token reads fresh") }
        if let old = t.before.cached, !old.untrustedTime, loaded.token.fetchedAt <= old.token.fetchedAt {
            fail("TOK-8: a loaded token replaced one fetched later")
        }
        if t.before.fetch != nil, t.after.fetch?.id != t.before.fetch?.id { fail("TOK-8: a load cancelled the fetch in flight") }
    }

    private func describe(_ event: ProviderMachine.Event) -> String {
        switch event {
        case .fetchEnded(let id, let result): "fetchEnded(\(id), \((try? result.get()).map { "success \($0)" } ?? "failure"))"
        default: "\(event)"
        }
    }
}

extension ProviderMachine.Action {
    var tellsSomeone: Bool {
        switch self {
        case .answer, .announce: true
        default: false
        }
    }

    var isPublish: Bool {
        if case .publish = self { true } else { false }
    }
}
