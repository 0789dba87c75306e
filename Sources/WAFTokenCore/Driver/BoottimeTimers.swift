#if os(Linux)
import CLinuxTimers
import Dispatch
import Glibc
import NIOConcurrencyHelpers

/// The provider's timers, on one `timerfd` of `CLOCK_BOOTTIME` (TOK-9).
///
/// Dispatch's timers run on `CLOCK_MONOTONIC`, which stops while the machine is suspended: after an
/// hour's sleep a refresh due during it would come an hour late. A timerfd on `CLOCK_BOOTTIME`
/// fires as soon as the machine runs again, and one whose deadline passed while the process was
/// stopped fires as soon as it continues. One descriptor serves every timer: it is armed for the
/// earliest deadline, and nothing wakes the process before then.
final class BoottimeTimers: @unchecked Sendable {
    // @unchecked: every stored property is a `let`; the timers themselves are behind `pending`'s
    // lock, and the read source is thread-safe but not marked Sendable on Linux.
    private struct Pending {
        let deadline: Int64
        let work: @Sendable () -> Void
    }

    private let descriptor: Int32
    private let source: any DispatchSourceRead
    private let pending = NIOLockedValueBox<(timers: [UInt64: Pending], lastID: UInt64, armedFor: Int64?)>(([:], 0, nil))

    /// Fires on `queue`; traps when the kernel offers no timerfd (Linux before 2.6.25).
    init(queue: DispatchQueue) {
        descriptor = timerfd_create(CLOCK_BOOTTIME, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        precondition(descriptor >= 0, "timerfd_create(CLOCK_BOOTTIME) failed: errno \(errno)")
        source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.fire() }
        let descriptor = descriptor
        source.setCancelHandler { close(descriptor) }
        source.resume()
    }

    deinit {
        source.cancel()
    }

    /// Now on `CLOCK_BOOTTIME`, in nanoseconds.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Runs `work` on the queue once `CLOCK_BOOTTIME` reaches `deadline`; returns its id.
    func schedule(at deadline: Int64, _ work: @escaping @Sendable () -> Void) -> UInt64 {
        pending.withLockedValue { state in
            state.lastID &+= 1
            state.timers[state.lastID] = Pending(deadline: deadline, work: work)
            rearm(&state)
            return state.lastID
        }
    }

    func cancel(_ id: UInt64) {
        pending.withLockedValue { state in
            guard state.timers.removeValue(forKey: id) != nil else { return }
            rearm(&state)
        }
    }

    /// The descriptor became readable: run what is due, in deadline order, and arm for the rest.
    private func fire() {
        var expirations: UInt64 = 0
        _ = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
        let now = Self.now()
        let due = pending.withLockedValue { state -> [Pending] in
            let due = state.timers.filter { $0.value.deadline <= now }.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
            for (id, _) in due { state.timers[id] = nil }
            state.armedFor = nil
            rearm(&state)
            return due.map(\.value)
        }
        for timer in due { timer.work() }
    }

    /// Arms the descriptor for the earliest deadline, or disarms it; only when that changed.
    private func rearm(_ state: inout (timers: [UInt64: Pending], lastID: UInt64, armedFor: Int64?)) {
        let earliest = state.timers.values.map(\.deadline).min()
        guard earliest != state.armedFor else { return }
        state.armedFor = earliest
        // A zero it_value disarms; a deadline already past is 1 ns, which fires at once.
        let at = earliest.map { max($0, 1) } ?? 0
        var setting = itimerspec(
            it_interval: timespec(tv_sec: 0, tv_nsec: 0), it_value: timespec(tv_sec: Int(at / 1_000_000_000), tv_nsec: Int(at % 1_000_000_000)))
        let result = timerfd_settime(descriptor, Int32(TFD_TIMER_ABSTIME), &setting, nil)
        precondition(result == 0, "timerfd_settime failed: errno \(errno)")
    }
}
#endif
