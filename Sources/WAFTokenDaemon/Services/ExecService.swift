import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFDelivery
import WAFProviderRegistry
import WAFTokenCore
import WAFTokenStorage

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `waf-tokend exec … -- CMD`'s supervisor, as a service of the runtime (docs/delivery.md): once
/// the chosen provider's token is in its file it starts CMD with `WAF_TOKEN_FILE`, passes SIGTERM,
/// SIGINT and SIGHUP on to it, signals or restarts it on each new token (`SupervisorMachine`), and
/// ends the runtime with the child's status when the child ends. No first token within the limit:
/// 69, and no child.
final class ExecService: Service, Sendable {
    struct Settings: Sendable {
        let provider: String
        let tokenFile: String
        /// The file is exec's own, in a private directory: 0600, no group.
        let privateFile: Bool
        let onToken: SupervisorMachine.OnToken
        let firstTokenTimeout: Duration
        let command: [String]
        /// Taken since the process started.
        let signals: ForwardedSignals
    }

    private let settings: Settings
    private let providers: ProviderSet
    private let persistence: TokenPersistence
    private let logger: Logger
    private let queue = DispatchQueue(label: "waf-tokend.exec")
    /// Where the child's end is waited for (one child at a time: a restart starts the next once
    /// the last has ended).
    private let waiter = DispatchQueue(label: "waf-tokend.exec.wait")
    /// The machine, the child and the kill timer: on `queue` only.
    private let state: NIOLockedValueBox<Running>
    /// The status the process exits with, once the child ended (69 without a first token).
    let exitStatus = NIOLockedValueBox<Int32?>(nil)
    /// The supervisor started in the foreground of the terminal on its standard input: every child
    /// (a restart's too) gets that foreground, as a shell gives it to a job.
    private let interactive = isatty(0) == 1 && tcgetpgrp(0) == getpgrp()

    private struct Running {
        var machine: SupervisorMachine
        var child: Spawned?
        /// The kill armed last; a cancelled one finds the count moved on.
        var kills = 0
        /// The token the child was last told of (or started with): never told twice.
        var told: String?
        var finished: CheckedContinuation<Void, Never>?
        var done = false
    }

    init(settings: Settings, providers: ProviderSet, persistence: TokenPersistence, logger: Logger) {
        self.settings = settings
        self.providers = providers
        self.persistence = persistence
        self.logger = logger
        state = NIOLockedValueBox(Running(machine: SupervisorMachine(onToken: settings.onToken)))
    }

    func run() async throws {
        guard let entry = providers.named(settings.provider) else { return finish(70) }
        // The signals are the supervisor's from the start: a stop before the first token ends it.
        settings.signals.attach { [self] signal in queue.async { [self] in carryOut { $0.signalled(signal) } } }
        defer { settings.signals.cancel() }
        let observer = entry.provider.observe { [self] event in
            guard case .tokenUpdated(let token, .fetched) = event else { return }
            queue.async { [self] in tellWhenStored(token.value, entry, triesLeft: 50) }
        }
        defer { entry.provider.stopObserving(observer) }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.startOnFirstToken(entry) }
            // Until the supervisor is done; cancelled (another service failed), the child is
            // asked to end as on SIGTERM, and its end is the end.
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    queue.async { [self] in
                        let done = state.withLockedValue { state in
                            if !state.done { state.finished = continuation }
                            return state.done
                        }
                        if done { continuation.resume() }
                    }
                }
            } onCancel: {
                queue.async { [self] in carryOut { $0.cancelled() } }
            }
            group.cancelAll()
        }
    }

    /// The child is told of a new token once the file holds it (a failing write is retried by
    /// storage; a newer token makes this one moot); checked again every 100 ms, for 5 s at most.
    private func tellWhenStored(_ token: String, _ entry: ProviderEntry, triesLeft: Int) {
        guard state.withLockedValue({ $0.told }) != token else { return }
        if persistence.holds(token, of: settings.provider) {
            state.withLockedValue { $0.told = token }
            return carryOut { $0.tokenArrived() }
        }
        guard triesLeft > 0, entry.provider.cachedToken()?.token.value == token else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in tellWhenStored(token, entry, triesLeft: triesLeft - 1) }
    }

    /// Waits, until `--first-token-timeout`, for a token that the file holds, then starts the
    /// child. A failed wait (the provider's retries ran out) is asked again: the provider keeps
    /// trying. A token restored from state is written to the file at once (docs/delivery.md);
    /// should the file still not hold it after a second, one refresh fetches a token that is.
    private func startOnFirstToken(_ entry: ProviderEntry) async {
        let deadline = ContinuousClock.now + settings.firstTokenTimeout
        var refreshed = false
        while !Task.isCancelled, ContinuousClock.now < deadline {
            guard let token = await tokenReady(entry, until: deadline) else {
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            for _ in 0..<20 where !Task.isCancelled {
                if await stored(token) {
                    return queue.async { [self] in
                        state.withLockedValue { $0.told = token }
                        carryOut { $0.firstTokenStored() }
                    }
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
            if !refreshed, entry.provider.cachedToken()?.token.value == token {
                refreshed = true
                _ = entry.provider.refreshToken { _, _ in }
            }
        }
        guard !Task.isCancelled else { return }
        writeStandardError(
            "waf-tokend: no first token of provider \(settings.provider) within \(settings.firstTokenTimeout.components.seconds) s; not starting \(settings.command[0])\n"
        )
        queue.async { [self] in carryOut { $0.firstTokenMissing() } }
    }

    private func stored(_ token: String) async -> Bool {
        await withCheckedContinuation { continuation in
            queue.async { [self] in continuation.resume(returning: persistence.holds(token, of: settings.provider)) }
        }
    }

    /// The provider's token once it has one (nil: its retries ran out, or the deadline or a
    /// cancellation came first: whichever comes first answers, once).
    private func tokenReady(_ entry: ProviderEntry, until deadline: ContinuousClock.Instant) async -> String? {
        let pending = NIOLockedValueBox<(continuation: CheckedContinuation<String?, Never>?, wait: WAFTokenWait?)>((nil, nil))
        @Sendable func answer(_ token: String?) {
            let (continuation, wait) = pending.withLockedValue { pending in
                defer { pending = (nil, nil) }
                return pending
            }
            wait?.cancel()
            continuation?.resume(returning: token)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                pending.withLockedValue { $0.continuation = continuation }
                let wait = entry.provider.onTokenReady { token, _ in answer(token?.value) }
                // Answered already (a cached token answers at once): the wait is spent.
                if pending.withLockedValue({ pending in
                    guard pending.continuation != nil else { return false }
                    pending.wait = wait
                    return true
                }) == false {
                    wait.cancel()
                }
                let left = max(ContinuousClock.now.duration(to: deadline), .zero)
                queue.asyncAfter(deadline: .now() + .milliseconds(Int(left / .milliseconds(1)))) { answer(nil) }
                if Task.isCancelled { answer(nil) }
            }
        } onCancel: {
            answer(nil)
        }
    }

    private func finish(_ status: Int32) {
        exitStatus.withLockedValue { $0 = status }
    }

    /// Applies an event to the machine and performs what it decides; on `queue`.
    private func carryOut(_ event: (inout SupervisorMachine) -> [SupervisorMachine.Action]) {
        let actions = state.withLockedValue { event(&$0.machine) }
        for action in actions {
            switch action {
            case .spawn:
                spawn()
            case .signal(let signal):
                state.withLockedValue { $0.child }?.kill(signal)
            case .signalGroup(let signal):
                state.withLockedValue { $0.child }?.signalGroup(signal)
            case .armKill(let delay):
                let armed = state.withLockedValue { state in
                    state.kills += 1
                    return state.kills
                }
                queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.components.seconds * 1_000_000_000))) { [self] in
                    guard state.withLockedValue({ $0.kills }) == armed else { return }
                    carryOut { $0.killDue() }
                }
            case .cancelKill:
                state.withLockedValue { $0.kills += 1 }
            case .exit(let status):
                finish(status)
                let continuation = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                    state.done = true
                    defer { state.finished = nil }
                    return state.finished
                }
                continuation?.resume()
            }
        }
    }

    /// Starts the child with the token file's path in its environment (never the token), and
    /// waits for its end on a thread of its own.
    private func spawn() {
        var environment = ProcessInfo.processInfo.environment
        environment["WAF_TOKEN_FILE"] = settings.tokenFile
        do throws(DeliveryFailure) {
            // In a process group of its own, which ends with it (EXEC-5); the terminal's foreground
            // group when the supervisor started in the foreground of the terminal on its input.
            let child = try Spawned(
                settings.command, environment: environment, stdin: .inherit, output: .inherit, searchPath: true, foreground: interactive,
                stopGrace: SupervisorMachine.restartGrace)
            state.withLockedValue { $0.child = child }
            logger.info("started", metadata: ["command": "\(settings.command[0])", "pid": "\(child.pid)"])
            waiter.async { [self] in
                // What the child left running in its group ends with it (SIGTERM, then SIGKILL).
                let status = child.wait(timeout: nil, leftoverGrace: SupervisorMachine.restartGrace)?.status ?? 1
                queue.async { [self] in carryOut { $0.childEnded(status: status) } }
            }
        } catch {
            writeStandardError("waf-tokend: \(error.description)\n")
            // As a shell reports a command it cannot run.
            queue.async { [self] in carryOut { $0.childEnded(status: 127) } }
        }
    }
}
