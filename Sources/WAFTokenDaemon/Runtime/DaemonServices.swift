import Dispatch
import ServiceLifecycle
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// Feeds provider events to the event streams, sinks, state, metrics and status line.
struct ProviderEventService: Service {
    let runtime: DaemonRuntime

    func run() async {
        // A token restored before the stream existed still goes to sinks that may be gone (tmpfs).
        if let cached = runtime.provider.cachedToken() { runtime.persist(cached.token) }
        runtime.reportStatus()
        for await event in runtime.events.cancelOnGracefulShutdown() {
            runtime.handle(event)
        }
    }
}

/// Tells the service manager the daemon is ready: once the socket listens, or, with
/// `readiness.waitForToken`, once the first token is cached, extending the start timeout meanwhile.
struct ReadinessService: Service {
    /// Each extension asks for this much more time, and is renewed well before it runs out.
    static let extensionStep = Duration.seconds(30)
    static let renewEvery = Duration.seconds(10)

    let runtime: DaemonRuntime

    func run() async {
        let notifier = runtime.options.notifier
        if runtime.configuration.waitForTokenBeforeReady {
            let clock = ContinuousClock()
            var renewAt = clock.now
            while runtime.provider.cachedToken()?.stale != false {
                if clock.now >= renewAt {
                    notifier.extendTimeout(by: Self.extensionStep)
                    notifier.status("waiting for the first token")
                    renewAt = clock.now + Self.renewEvery
                }
                do {
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(250)) }
                } catch {
                    return
                }
            }
        }
        notifier.ready()
        runtime.reportStatus()
        try? await gracefulShutdown()
    }
}

/// SIGUSR1, SIGUSR2 and SIGHUP through `DispatchSourceSignal`s, on a queue of their own.
struct SignalService: Service {
    let runtime: DaemonRuntime

    /// Signals the daemon handles itself. Their default action kills the process, so they are
    /// ignored as the very first thing the daemon does, before any can arrive unhandled.
    static let handled: [Int32] = [SIGUSR1, SIGUSR2, SIGHUP]

    static func ignoreDefaultActions() {
        for signal in handled { Glibc.signal(signal, SIG_IGN) }
    }

    func run() async {
        let queue = DispatchQueue(label: "waf-tokend.signals")
        let runtime = runtime
        var sources: [any DispatchSourceSignal] = []
        for signal in Self.handled {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler {
                // Signals that arrive together are delivered once, with their count.
                let count = Int(source.data)
                switch signal {
                case SIGUSR1: runtime.lifecycleSignal(foreground: true, count: count, name: "SIGUSR1")
                case SIGUSR2: runtime.lifecycleSignal(foreground: false, count: count, name: "SIGUSR2")
                default: Task { await runtime.reload() }
                }
            }
            source.resume()
            sources.append(source)
        }
        try? await gracefulShutdown()
        for source in sources { source.cancel() }
    }
}

/// Serves until the graceful stop begins, then stops accepting and drains (SIDECAR.md: finish
/// requests in flight, bounded, notify STOPPING).
struct ServerService: Service {
    static let grace = Duration.seconds(5)

    let runtime: DaemonRuntime

    func run() async {
        try? await gracefulShutdown()
        runtime.logger.info("stopping")
        runtime.options.notifier.stopping()
        runtime.api.events.finishAll()
        await runtime.server.stop(grace: Self.grace)
    }
}

/// Pings the service manager's watchdog at half its interval, but only after a round trip through
/// the provider's state queue: if the provider wedges, the pings stop and systemd restarts us.
struct WatchdogService: Service {
    let runtime: DaemonRuntime

    func run() async {
        let notifier = runtime.options.notifier
        guard let interval = notifier.watchdogInterval else {
            try? await gracefulShutdown()
            return
        }
        let provider = runtime.provider
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "waf-tokend.watchdog"))
        timer.schedule(deadline: .now(), repeating: .nanoseconds(Int(interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000)))
        timer.setEventHandler { provider.ping { notifier.watchdogPing() } }
        timer.resume()
        if let delay = runtime.options.wedgeStateQueueAfter {
            // The debug switch: wedge the provider on purpose, so that a test sees the pings stop.
            // It counts from the first token, so that a slow start cannot wedge before it.
            let due = try? await cancelWhenGracefulShutdown { () async throws -> Bool in
                while provider.cachedToken() == nil { try await Task.sleep(for: .milliseconds(50)) }
                try await Task.sleep(for: delay)
                return true
            }
            if due == true {
                runtime.logger.warning("debug switch: wedging the provider's state queue")
                provider.ping { DispatchSemaphore(value: 0).wait() }
            }
        }
        try? await gracefulShutdown()
        timer.cancel()
    }
}
