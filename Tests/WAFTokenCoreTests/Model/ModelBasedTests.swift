import Foundation
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

/// Seeded random sequences of events against the pure machine, every rule checked after every
/// transition. CI runs a few thousand; `WAF_MODEL_SEQUENCES=1000000` runs a million, and a failure
/// prints its seed and the shrunk steps, which `WAF_MODEL_SEED=<seed> WAF_MODEL_SEQUENCES=1`
/// replays exactly.
@Suite("Model-based: random sequences against the rules", .offPool, .timeLimit(.minutes(1)))
struct ModelBasedTests {

    @Test(
        "TOK-4, TOK-5, TOK-6, TOK-7, TOK-8, RET-1, RET-2, RET-6, RET-7, LIFE-2, LIFE-3 and the reload rules hold after every step of every random sequence"
    )
    func randomSequencesKeepEveryRule() {
        var transitions = 0
        for seed in ModelRun.firstSeed..<(ModelRun.firstSeed + UInt64(ModelRun.sequences)) {
            let scenario = Scenario(seed: seed)
            let steps = scenario.steps(count: ModelRun.steps)
            let outcome = scenario.run(steps)
            transitions += outcome.transitions
            guard let first = outcome.violations.first else { continue }
            let shrunk = Shrinker.shrink(steps) { !scenario.run($0).violations.isEmpty }
            let replay = scenario.run(shrunk)
            Issue.record(
                """
                seed \(seed): \(first)
                settings: \(scenario.settings.configuration.settings.sorted { $0.key < $1.key }), profile \(scenario.settings.profile), jitter \(scenario.settings.jitter)
                restored: \(scenario.restored.map { "\($0.fetchedAt)" } ?? "none")
                shrunk to \(shrunk.count) of \(steps.count) steps: \(shrunk)
                then: \(replay.violations.first ?? "(no longer fails)")
                replay: WAF_MODEL_SEED=\(seed) WAF_MODEL_SEQUENCES=1 swift test --filter ModelBasedTests
                """)
            return
        }
        #expect(transitions > ModelRun.sequences * 10, "the sequences did something")
    }
}

/// How many sequences, from which seed, of how many steps: from the environment, for long runs.
enum ModelRun {
    static let environment = ProcessInfo.processInfo.environment
    static let sequences = environment["WAF_MODEL_SEQUENCES"].flatMap(Int.init) ?? 3000
    static let firstSeed = environment["WAF_MODEL_SEED"].flatMap(UInt64.init) ?? 1
    static let steps = environment["WAF_MODEL_STEPS"].flatMap(Int.init) ?? 120
}

/// One seed's settings, reload variants, start and steps.
struct Scenario {
    let seed: UInt64
    let settings: ProviderMachine.Settings
    let variants: [ProviderMachine.Settings]
    let restored: WAFTokenProviderOptions.RestoredToken?
    private static let wallOrigin = Date(timeIntervalSince1970: 1_800_000_000)

    init(seed: UInt64) {
        self.seed = seed
        var random = SplitMix64(seed: seed)
        func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }
        let current = random.next() % 4 == 0
        func configuration(domain: String, url: String) -> WAFConfiguration {
            try! WAFConfiguration(
                applicationIntegrationUrl: url, domainName: domain, backgroundRefreshEnabled: random.next() % 5 != 0,
                maxErrorTokenRefreshDelayMsec: pick([1, 100, 5000, 30_000]),
                maxRetryCount: current ? pick([0, 1, 5, 100]) : pick([0, 1, 3, 5, 10]),
                setTokenCookie: random.next() % 2 == 0, tokenCookiePath: pick(["/", "/web"]),
                tokenRefreshDelaySec: current ? pick([88, 300]) : pick([300, 600]), ranges: current ? .current : .seed)
        }
        let a = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
        let b = "https://ba9876543210.edge.sdk.awswaf.com/ba9876543210/ba9876543210"
        func variant(_ configuration: WAFConfiguration) -> ProviderMachine.Settings {
            .init(
                configuration: configuration, profile: pick([.ios, .android]), jitter: random.next() % 2 == 0, cookieSecure: random.next() % 2 == 0)
        }
        settings = variant(configuration(domain: "example.com", url: a))
        variants = [
            variant(configuration(domain: "example.com", url: a)), variant(configuration(domain: "example.com", url: a)),
            variant(configuration(domain: "other.example.org", url: a)), variant(configuration(domain: "example.com", url: b)),
        ]
        let ages: [Double?] = [nil, nil, 10, 299, 301, 5000, -100]
        restored = pick(ages).map { .init(value: "restored", fetchedAt: Self.wallOrigin.addingTimeInterval(-$0)) }
    }

    func steps(count: Int) -> [ModelStep] {
        var random = SplitMix64(seed: seed &* 31 &+ 7)
        return ModelStep.sequence(count: count, using: &random, reloadVariants: variants.count)
    }

    struct Outcome {
        var violations: [String]
        var transitions: Int
    }

    /// Runs `steps` from the start, then stops the provider; every rule checked all along.
    func run(_ steps: [ModelStep]) -> Outcome {
        var world = ProviderWorld(settings: settings, reloadVariants: variants, seed: seed, wallOrigin: Self.wallOrigin)
        var checker = RuleChecker()
        var transitions = 0
        func observe(_ transition: ProviderWorld.Transition, _ world: ProviderWorld) {
            transitions += 1
            checker.observe(transition, world: world)
        }
        world.start(restored: restored, observe: observe)
        checker.checkState(world)
        for step in steps {
            world.apply(step, observe: observe)
            checker.checkState(world)
            if !checker.violations.isEmpty { break }
        }
        world.apply(.stop, observe: observe)
        checker.checkState(world)
        var violations = checker.violations
        for (id, count) in world.answers where count != 1 { violations.append("TOK-6: waiter \(id.rawValue) answered \(count) times") }
        return Outcome(violations: violations, transitions: transitions)
    }
}
