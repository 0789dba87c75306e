import Dispatch
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's signal sources, armed as a start begins and bound to `SignalService` once the
/// providers and the reloader it acts on exist: libdispatch arms a source on its own threads, and
/// a start that armed them only then waited for the arming on its way to `READY=1`, 3-7 % of a
/// start (docs/performance.md, "Start-up in detail"). Until the binding, what arrives is kept, in
/// its order and with its counts, and handed over then (a SIGHUP's reload waits for the start
/// to be done all the same: `Reloader.release`); SIGTERM and SIGINT ask `stop` at once.
/// Everything runs on the sources' one serial queue, which orders the hand-over and what follows.
final class SignalArming: @unchecked Sendable {
    /// What SIGTERM and SIGINT stop: the group, once `run` has one; a stop asked before is kept.
    let stop: StopRequest
    private let queue = DispatchQueue(label: "waf-tokend.signals")
    // @unchecked: `sources` is set in init and read after; `target` and `pending` are touched only
    // on `queue`. Dispatch sources are thread-safe but not marked Sendable on Linux.
    private var sources: [any DispatchSourceSignal] = []
    private var target: (@Sendable (Int32, Int) -> Void)?
    private var pending: [(signal: Int32, count: Int)] = []
    // A semaphore, not a group: a source cancelled before it registered never runs its handler,
    // and a group dropped while entered traps.
    private let registered = DispatchSemaphore(value: 0)

    /// `reloadsOnHangUp` and `stopsOnTerminate`: false under `waf-tokend exec`, whose child
    /// SIGHUP, SIGTERM and SIGINT are for.
    convenience init(reloadsOnHangUp: Bool = true, stopsOnTerminate: Bool = true) {
        self.init(
            arming: SignalService.handled.filter { $0 != SIGHUP || reloadsOnHangUp } + (stopsOnTerminate ? SignalService.stopping : []))
    }

    /// `signals`' sources; none for a test that hands them over itself (`deliver`).
    init(arming signals: [Int32], stop: StopRequest = StopRequest()) {
        self.stop = stop
        for signal in signals {
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { [weak self, source] in
                // Signals that arrive together are delivered once, with their count. (The source and
                // its handler hold each other until cancelled, in `cancel` or deinit.)
                self?.arrived(signal, count: Int(source.data))
            }
            source.setRegistrationHandler { [registered] in registered.signal() }
            source.resume()
            sources.append(source)
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }

    /// From now on every signal goes to `target`, those kept so far first.
    func bind(_ target: @escaping @Sendable (Int32, Int) -> Void) {
        queue.async { [self] in
            self.target = target
            for (signal, count) in pending { target(signal, count) }
            pending = []
        }
    }

    /// `resume` arms a source later, on libdispatch's manager thread; until then SIGUSR1, SIGUSR2
    /// and SIGHUP are ignored and lost, and SIGTERM and SIGINT take their default action. Waits
    /// for it, which has mostly happened by the time this is asked; whether it did within 5 s.
    @discardableResult
    func waitUntilArmed(logger: Logger) -> Bool {
        let deadline = DispatchTime.now() + 5
        guard sources.indices.allSatisfy({ _ in registered.wait(timeout: deadline) == .success }) else {
            logger.warning("signal handlers not armed within 5 s: a signal sent now may be lost")
            return false
        }
        return true
    }

    /// A signal as its source hands it over, on the sources' queue.
    func deliver(_ signal: Int32, count: Int) {
        queue.async { [self] in arrived(signal, count: count) }
    }

    /// What is kept for the binding, in order (for tests).
    func kept() -> [Int32] {
        queue.sync { pending.map(\.signal) }
    }

    /// Disarms all but SIGTERM's and SIGINT's, which stay until the end (deinit): one sent again
    /// while the others stop changes nothing, as under the group's own handlers.
    func cancelAllButStop() {
        for source in sources where !SignalService.stopping.contains(Int32(source.handle)) { source.cancel() }
    }

    private func arrived(_ signal: Int32, count: Int) {
        if SignalService.stopping.contains(signal) { stop.request(signal, count: count) }
        if let target { target(signal, count) } else { pending.append((signal, count)) }
    }
}
