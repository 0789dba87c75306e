import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Solves proof-of-work puzzles on several threads of its own, off any caller's queue.
///
/// Workers take chunks of consecutive nonces from a shared counter and stop once every nonce below
/// the best solution found is checked, so the answer is the smallest solving nonce: the same as a
/// sequential search, whatever the thread count.
public struct ProofOfWorkSolver: Sendable {
    public var workers: Int
    public var timeLimit: Duration

    public static var availableCores: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    public init(workers: Int = ProofOfWorkSolver.availableCores, timeLimit: Duration = .seconds(60)) {
        self.workers = max(1, workers)
        self.timeLimit = timeLimit
    }

    public struct Solution: Sendable, Hashable {
        public let nonce: String
        /// Nonces hashed by all workers together.
        public let noncesTried: Int
        public let elapsed: Duration
    }

    /// Every search of the process takes its turn here (`SolveGate`).
    private static let gate = SolveGate()

    /// Solves `work`, after the searches that came first. Cancelling the task stops every worker
    /// within one chunk of nonces (or its wait for its turn).
    public func solve(_ work: ProofOfWork) async throws(ProofOfWorkError) -> Solution {
        if let reason = work.unsolvableReason { throw .unsolvable(reason) }
        do {
            try await Self.gate.enter()
        } catch {
            throw .cancelled
        }
        defer { Self.gate.leave() }
        let search = Search(work: work, stopAtSolution: true)
        let clock = ContinuousClock()
        let started = clock.now
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                run(search, until: started + timeLimit) { continuation.resume() }
            }
        } onCancel: {
            search.cancel()
        }
        let tried = search.tried.load(ordering: .relaxed)
        if let failure = search.failure { throw failure }
        let best = search.best.load(ordering: .relaxed)
        if best != .max {
            return Solution(nonce: work.nonceFormat.string(best), noncesTried: tried, elapsed: clock.now - started)
        }
        throw search.cancelled.load(ordering: .relaxed) ? .cancelled : .timedOut(afterNonces: tried)
    }

    /// Hashes nonces of `work` for `duration` without stopping at solutions, and returns how many;
    /// the benchmark's measure of speed.
    public func measure(_ work: ProofOfWork, for duration: Duration) throws(ProofOfWorkError) -> (nonces: Int, elapsed: Duration) {
        let search = Search(work: work, stopAtSolution: false)
        let clock = ContinuousClock()
        let started = clock.now
        let done = DispatchSemaphore(value: 0)
        run(search, until: started + duration) { done.signal() }
        done.wait()
        if let failure = search.failure { throw failure }
        return (search.tried.load(ordering: .relaxed), clock.now - started)
    }

    private func run(_ search: Search, until deadline: ContinuousClock.Instant, then completion: @escaping @Sendable () -> Void) {
        let group = DispatchGroup()
        for index in 0..<workers {
            group.enter()
            // A serial queue of its own per worker: it overcommits, so a worker gets a thread even
            // while the shared pools are busy, and solving never waits behind other work.
            DispatchQueue(label: "waf-pow.worker.\(index)", qos: .utility).async {
                search.work(until: deadline)
                group.leave()
            }
        }
        // Not a global queue: libdispatch's shared pool, once used, wakes the process every second.
        group.notify(queue: DispatchQueue(label: "waf-pow.done", qos: .utility), execute: completion)
    }
}

/// The state the workers share: all atomics, so no lock is taken per chunk.
private final class Search: Sendable {
    let work: ProofOfWork
    let stopAtSolution: Bool
    let chunkSize: Int
    let nextNonce = Atomic<Int>(0)
    let best = Atomic<Int>(.max)
    let tried = Atomic<Int>(0)
    let cancelled = Atomic<Bool>(false)
    private let failed = Atomic<Bool>(false)
    /// Written once, by the worker that set `failed`; read only after every worker finished (the
    /// dispatch group orders the write before the read).
    private nonisolated(unsafe) var firstFailure: ProofOfWorkError?

    init(work: ProofOfWork, stopAtSolution: Bool) {
        self.work = work
        self.stopAtSolution = stopAtSolution
        // Large enough that the shared counter is touched rarely, small enough that cancellation
        // and the deadline are noticed within milliseconds.
        chunkSize = work.type == .sha256 ? 4096 : 8
    }

    var failure: ProofOfWorkError? { firstFailure }

    func cancel() { cancelled.store(true, ordering: .relaxed) }

    func work(until deadline: ContinuousClock.Instant) {
        let clock = ContinuousClock()
        var hasher: NonceHasher
        do {
            hasher = try NonceHasher(work)
        } catch {
            fail(error)
            return
        }
        while !cancelled.load(ordering: .relaxed), !failed.load(ordering: .relaxed), clock.now < deadline {
            let start = nextNonce.wrappingAdd(chunkSize, ordering: .relaxed).oldValue
            if stopAtSolution, start >= best.load(ordering: .relaxed) { return }
            var checked = 0
            hasher.seek(to: start)
            for nonce in start..<(start + chunkSize) {
                if stopAtSolution, nonce >= best.load(ordering: .relaxed) { break }
                checked += 1
                let zeros: Int
                do {
                    zeros = try hasher.leadingZeroBits()
                } catch {
                    fail(error)
                    return
                }
                if stopAtSolution, zeros >= work.difficulty {
                    lowerBest(to: nonce)
                    break
                }
                hasher.advance()
            }
            tried.add(checked, ordering: .relaxed)
        }
    }

    private func lowerBest(to nonce: Int) {
        var current = best.load(ordering: .relaxed)
        while nonce < current {
            let (exchanged, original) = best.compareExchange(expected: current, desired: nonce, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    private func fail(_ error: ProofOfWorkError) {
        if failed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            firstFailure = error
        }
    }
}
