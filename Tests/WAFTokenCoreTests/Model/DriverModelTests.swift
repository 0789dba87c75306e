import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

/// The random sequences again, against `WAFTokenProvider` itself (the driver executing the
/// machine's actions) on the virtual scheduler, checked from outside: what the token service saw,
/// what callers got, what was stored, and that nothing is left once the provider is released.
@Suite("Model-based: random sequences against the driver", .offPool, .timeLimit(.minutes(1)))
struct DriverModelTests {
    @Test("TOK-4, TOK-6, LIFE-2 and the reload rules hold through the driver; a released provider leaves nothing behind")
    func randomSequencesThroughTheDriver() {
        let count = max(1, ModelRun.sequences / 15)
        for seed in ModelRun.firstSeed..<(ModelRun.firstSeed + UInt64(count)) {
            let problems = DriverRun(seed: seed).run(steps: min(ModelRun.steps, 80))
            if let first = problems.first {
                Issue.record("seed \(seed): \(first) (replay: WAF_MODEL_SEED=\(seed) WAF_MODEL_SEQUENCES=15 swift test --filter DriverModelTests)")
                return
            }
        }
    }
}

/// What the test knows while it drives a provider: the lifecycle and settings it set, the callers
/// still waiting. The fetcher checks LIFE-2 against it when a fetch starts.
private final class Outside: Sendable {
    struct State {
        var lifecycle = WAFLifecycleState.foreground
        var settings: ProviderMachine.Settings
        var pending = 0
        var problems: [String] = []
    }

    let state: NIOLockedValueBox<State>

    init(settings: ProviderMachine.Settings) {
        state = NIOLockedValueBox(State(settings: settings))
    }

    func problem(_ text: String) { state.withLockedValue { $0.problems.append(text) } }
}

/// A scripted fetcher that checks, as each fetch starts, that someone may want it (LIFE-2).
private struct ProbingFetcher: WAFTokenFetcher {
    let inner: ScriptedTokenFetcher
    let outside: Outside

    func fetchToken(_ request: WAFTokenFetchRequest) async throws(SdkError) -> String {
        outside.state.withLockedValue { state in
            let background = state.settings.configuration.backgroundRefreshEnabled
            if background && !state.settings.profile.isActive(state.lifecycle) && state.pending == 0 {
                state.problems.append("LIFE-2: a fetch while \(state.lifecycle) with nobody waiting")
            }
        }
        return try await inner.fetchToken(request)
    }
}

private struct DriverRun {
    /// Eight times what a run of the rules needs (at most 243 jobs in 200 runs, measured); far below
    /// what a provider re-arming every few seconds through a scenario's hours makes.
    static let jobBudget = 2_000

    let scenario: Scenario

    init(seed: UInt64) {
        scenario = Scenario(seed: seed)
    }

    func run(steps count: Int) -> [String] {
        var random = SplitMix64(seed: scenario.seed &+ 99)
        let scheduler = VirtualScheduler(wallClockOrigin: Date(timeIntervalSince1970: 1_800_000_000))
        let script: [ScriptedTokenFetcher.Step] = (0..<400).map { _ in
            random.next() % 3 == 0 ? .fail(ModelStep.errors[Int(random.next() % 7)]) : .success
        }
        let latency: Duration = [.zero, .milliseconds(50), .seconds(2)][Int(random.next() % 3)]
        let service = ScriptedTokenFetcher(scheduler: scheduler, script: script, latency: latency)
        let outside = Outside(settings: scenario.settings)
        let persisted = Recorder<WAFTokenRecord>()
        let answers = NIOLockedValueBox<[Int: Int]>([:])
        weak var released: WAFTokenProvider?
        do {
            let settings = scenario.settings
            let provider = WAFTokenProvider(
                configuration: settings.configuration, fetcher: ProbingFetcher(inner: service, outside: outside), scheduler: scheduler,
                options: .init(
                    lifecycleProfile: settings.profile, jitter: settings.jitter, randomUnit: { 0.5 }, cookieSecure: settings.cookieSecure,
                    restoredToken: scenario.restored, persist: { persisted.append($0) }, logger: .quiet))
            released = provider
            scheduler.runUntilIdle()  // the start, before the test changes what the provider is told
            var callers = 0
            func callback() -> WAFTokenResultCallback {
                callers += 1
                let id = callers
                outside.state.withLockedValue { $0.pending += 1 }
                return { _, _ in
                    answers.withLockedValue { $0[id, default: 0] += 1 }
                    outside.state.withLockedValue { $0.pending -= 1 }
                }
            }
            for step in scenario.steps(count: count) {
                if ProcessInfo.processInfo.environment["WAF_MODEL_TRACE"] != nil {
                    print(
                        "t=\(scheduler.now) \(step) calls=\(service.callTimes.count) problems=\(outside.state.withLockedValue { $0.problems.count })")
                }
                switch step {
                case .advance(let duration): scheduler.advance(by: duration)
                case .fetchSucceeds, .fetchFails: scheduler.advanceToNextJob()
                case .lifecycle(let state):
                    outside.state.withLockedValue { $0.lifecycle = state }
                    provider.setLifecycle(state)
                case .request(.ready(let force)):
                    if force { provider.refreshToken(callback()) } else { provider.onTokenReady(callback()) }
                case .request(.onDemand):
                    let answer = callback()
                    provider.getToken { answer($0, nil) }
                case .load(let ago): provider.loadTokenIntoProvider("loaded", fetchedAt: scheduler.wallClockNow.addingTimeInterval(-ago))
                case .loadAbsurd(let index):
                    provider.loadTokenIntoProvider("absurd", fetchedAt: ModelStep.absurdDates[index % ModelStep.absurdDates.count])
                case .reload(let index):
                    let settings = scenario.variants[index % scenario.variants.count]
                    outside.state.withLockedValue { $0.settings = settings }
                    provider.reconfigure(
                        settings.configuration, lifecycleProfile: settings.profile, jitter: settings.jitter, cookieSecure: settings.cookieSecure)
                case .stop: provider.shutdown()
                // Here every caller must be answered in the end; a withdrawn one never is, which the
                // machine's model run and WithdrawnWaitTests check.
                case .withdraw: break
                }
                scheduler.runUntilIdle()
                // A provider that re-arms far too often (a refresh every few seconds) would keep this
                // run busy for minutes of real time: it fails here instead, at once.
                if scheduler.jobsRun > Self.jobBudget {
                    outside.problem("over \(Self.jobBudget) scheduler jobs by t=\(scheduler.now): a timer re-arms far too often (RET-6, RET-2?)")
                    break
                }
            }
            provider.shutdown()
            scheduler.runUntilIdle()
            if answers.withLockedValue({ $0.count }) != callers {
                outside.problem("TOK-6: \(callers) callers, \(answers.withLockedValue { $0.count }) answered")
            }
        }
        scheduler.runUntilIdle()
        var problems = outside.state.withLockedValue { $0.problems }
        if released != nil { problems.append("the provider outlived its last reference") }
        if scheduler.nextJobTime != nil { problems.append("a timer or fetch left after stop and release") }
        if service.maxInFlight > 1 { problems.append("TOK-4: \(service.maxInFlight) fetches in flight at once") }
        if answers.withLockedValue({ $0.values.contains { $0 != 1 } }) { problems.append("TOK-6: a callback not called exactly once") }
        let issued = service.issuedFor
        for record in persisted.all {
            if let token = record.token, let identity = issued[token.value], identity != record.identity {
                problems.append("stored a token of \(identity) under \(record.identity)")
            }
        }
        return problems
    }
}
