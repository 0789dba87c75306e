import Logging
import NIOConcurrencyHelpers
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the canary reports, for the daemon to turn into metrics, events and log lines: the
/// canary knows nothing of Prometheus or the event stream.
public protocol CanaryReporting: Sendable {
    /// A probe's answer (`waf_tokend_canary_total{provider,result}`; an accepted one also moves
    /// `waf_tokend_canary_last_accepted_timestamp_seconds`).
    func probed(provider: String, result: CanaryMachine.Result, at: Date)
    /// The verdict moved (the `canary` event, a log line).
    func verdictChanged(provider: String, to verdict: CanaryMachine.Verdict, after result: CanaryMachine.Result)
}

/// The token canary of one provider (docs/canary.md): drives its `CanaryMachine` on the
/// provider's kind of scheduler (real time here, virtual time in tests), asks the protected API
/// with the token, forces one refresh when the token is challenged, and writes what it found on
/// the provider's `CanaryBoard`.
public final class CanaryService: Sendable {
    private struct State {
        var machine: CanaryMachine
        var timer: WAFCancellable?
        var stopped = false
        /// The last probe's answer, for the verdict's report.
        var lastResult = CanaryMachine.Result.accepted
    }

    private let entry: ProviderEntry
    private let probe: CanaryProbe
    private let placement: CanaryProbe.Placement
    private let scheduler: any WAFScheduler
    private let reporting: any CanaryReporting
    private let logger: Logger
    private let state: NIOLockedValueBox<State>

    package init(
        entry: ProviderEntry, probe: CanaryProbe, placement: CanaryProbe.Placement, settings: CanaryMachine.Settings, affectsReadiness: Bool,
        scheduler: any WAFScheduler, reporting: any CanaryReporting, logger: Logger
    ) {
        self.entry = entry
        self.probe = probe
        self.placement = placement
        self.scheduler = scheduler
        self.reporting = reporting
        self.logger = logger
        state = NIOLockedValueBox(State(machine: CanaryMachine(settings: settings)))
        entry.canary.configure(url: probe.url, affectsReadiness: affectsReadiness)
    }

    /// The first probe as soon as there is a token.
    public func start() {
        scheduler.execute { [self] in due() }
    }

    /// No more probes.
    public func stop() {
        let timer = state.withLockedValue { state in
            state.stopped = true
            defer { state.timer = nil }
            return state.timer
        }
        timer?.cancel()
    }

    /// Evidence from elsewhere (the proxy met a challenge on a token the canary had seen
    /// accepted): ask again now rather than at the next interval.
    public func probeSoon() {
        scheduler.execute { [self] in
            let timer = state.withLockedValue { state -> WAFCancellable? in
                guard state.machine.isWaiting else { return nil }
                defer { state.timer = nil }
                return state.timer
            }
            guard let timer else { return }
            timer.cancel()
            due()
        }
    }

    private func due() {
        let token = entry.currentToken?.token.value
        carryOut { $0.due(token: token) }
    }

    /// Applies an event to the machine and performs what it decides; on the scheduler's context.
    private func carryOut(_ event: (inout CanaryMachine) -> [CanaryMachine.Action]) {
        let (actions, stopped) = state.withLockedValue { state in (event(&state.machine), state.stopped) }
        guard !stopped else { return }
        for action in actions {
            switch action {
            case .probe(let token):
                _ = scheduler.spawn { [self] in
                    let result = await probe.probe(token: token, placement: placement)
                    scheduler.execute { [self] in answered(result, token: token) }
                }
            case .forceRefresh:
                let (decision, _) = entry.forcedRefresh.request(entry.provider) { [self] _, _ in
                    scheduler.execute { [self] in carryOut { $0.refreshed(token: entry.currentToken?.token.value) } }
                }
                if decision.isLimited { carryOut { $0.refreshed(token: entry.currentToken?.token.value) } }
            case .arm(let delay):
                let timer = scheduler.schedule(after: delay) { [self] in
                    state.withLockedValue { $0.timer = nil }
                    due()
                }
                state.withLockedValue { $0.timer = timer }
            case .verdict(let verdict):
                let result = state.withLockedValue { $0.lastResult }
                reporting.verdictChanged(provider: entry.name, to: verdict, after: result)
            }
        }
    }

    private func answered(_ result: CanaryMachine.Result, token: String) {
        // A probe that ends after a stop (a reload removed the canary, or the identity changed)
        // reports nothing: its token may be one the provider no longer has.
        let previous = state.withLockedValue { state -> CanaryMachine.Result? in
            guard !state.stopped else { return nil }
            defer { state.lastResult = result }
            return state.lastResult
        }
        guard let previous else { return }
        reporting.probed(provider: entry.name, result: result, at: scheduler.wallClockNow)
        let metadata: Logger.Metadata = ["provider": "\(entry.name)"]
        if result == .challenged, previous != .challenged {
            logger.notice("canary: the web ACL challenged the token; refreshing it once", metadata: metadata)
        } else if result == .accepted, previous == .challenged {
            logger.notice("canary: the web ACL accepts the new token", metadata: metadata)
        }
        carryOut { $0.answered(result) }
        let verdict = state.withLockedValue { $0.machine.verdict }
        entry.canary.record(result: result.rawValue, verdict: CanaryBoard.Verdict(verdict), token: token)
    }
}

extension CanaryBoard.Verdict {
    init(_ verdict: CanaryMachine.Verdict) {
        switch verdict {
        case .unknown: self = .unknown
        case .accepted: self = .accepted
        case .rejected: self = .rejected
        }
    }
}

extension CanaryMachine {
    var isWaiting: Bool { phase == .waiting }
}
