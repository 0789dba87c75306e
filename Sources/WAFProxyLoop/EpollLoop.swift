import CEpoll
import Glibc
import NIOConcurrencyHelpers
import Synchronization

/// What the loop tells of a descriptor registered with it.
public protocol LoopHandler: AnyObject {
    /// epoll reported `events` (`EPOLLIN`, `EPOLLOUT`, `EPOLLHUP`, `EPOLLERR`) for the handler's
    /// descriptor. Readiness may be stale (the descriptor was read meanwhile): a handler expects
    /// `EAGAIN`.
    func ready(_ events: UInt32)
}

/// One thread's event loop on epoll, level-triggered, as nginx's: descriptors with their
/// handlers, timers on `CLOCK_MONOTONIC` (one timerfd for the earliest), and work handed in from
/// other threads through an eventfd. Everything but `execute`, `stop`, `inLoop` and `run` belongs
/// to the loop's thread (or to its owner before `run`); the loop's state is touched there only,
/// which is what makes it Sendable. It runs once, and outlives the sockets made on it.
public final class EpollLoop: @unchecked Sendable {
    public struct Timer: Hashable, Sendable {
        let id: UInt64
    }

    private let epoll: Int32
    private let wakeup: Int32
    private let timerDescriptor: Int32
    /// Each registered descriptor's handler, with the registration's number: epoll's data carries
    /// both (the descriptor in the low half), so that an event for a descriptor closed and reused
    /// within one batch (nginx's "stale event") finds another number and is dropped. Indexed by
    /// the descriptor, as nginx's connections are: the kernel hands out the lowest free number, so
    /// the table is as long as the most descriptors open at once, and an event finds its handler
    /// without the hashing a dictionary did for each one (0.4 % of the proxy's CPU).
    private var handlers: [Slot] = []
    private struct Slot {
        var registration: UInt32 = 0
        var handler: (any LoopHandler)?
    }
    private var nextRegistration: UInt32 = 0
    private var timers = TimerHeap()
    private var timerBodies: [UInt64: () -> Void] = [:]
    /// Cancelled timers still in the heap (at most; some may have come up since).
    private var cancelledInHeap = 0
    private var nextTimer: UInt64 = 0
    /// What the timerfd is set to (`.max`: not set).
    private var armedFor = UInt64.max
    /// A pthread lock (NIO's), which the thread sanitizer sees; `Synchronization.Mutex`'s lives in
    /// the uninstrumented standard library on Linux.
    private let inbox = NIOLockedValueBox<(work: [@Sendable () -> Void], stopping: Bool)>(([], false))
    /// The thread that runs the loop (0 before `run`), read from any thread by `inLoop`.
    private let thread = Atomic<UInt>(0)
    /// Where sockets read into before they keep what arrived (the loop's thread only). 16 KiB, the
    /// most one read takes: what a read brings is held until the other side takes it, so with a
    /// thousand connections waiting for a slow peer this is what each costs (the proxy's TENANT-12
    /// test found 64 KiB reads past the unit's MemoryMax).
    var scratch = [UInt8](repeating: 0, count: 16 * 1024)
    /// What a socket's `writev` points at, held for the call (the loop's thread only).
    let vectors = LoopVectors()

    public init() throws(LoopError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeup = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        timerDescriptor = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC | TFD_NONBLOCK))
        guard epoll >= 0, wakeup >= 0, timerDescriptor >= 0 else {
            let error = LoopError.system("epoll, eventfd or timerfd", errno)
            for descriptor in [epoll, wakeup, timerDescriptor] where descriptor >= 0 { close(descriptor) }
            throw error
        }
        for descriptor in [wakeup, timerDescriptor] {
            var event = epoll_event(events: EPOLLIN.rawValue, data: Self.data(descriptor, 0))
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event) == 0 else {
                let error = LoopError.system("epoll_ctl", errno)
                for descriptor in [epoll, wakeup, timerDescriptor] { close(descriptor) }
                throw error
            }
        }
    }

    deinit {
        for descriptor in [epoll, wakeup, timerDescriptor] { close(descriptor) }
    }

    /// Nanoseconds on `CLOCK_MONOTONIC`, the timers' clock.
    public static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// When the loop's current turn began: what its handlers take as now for their deadlines and
    /// timings, one clock read a turn rather than several a request. On the loop's thread only.
    private var turnBegan: UInt64 = 0

    /// Now, as the loop's handlers see it: when this turn began (a turn is short), or the clock
    /// itself before the loop ran one.
    public var time: UInt64 { turnBegan != 0 ? turnBegan : Self.now }

    /// Whether the caller runs on the loop's thread.
    public var inLoop: Bool {
        thread.load(ordering: .acquiring) == pthread_self()
    }

    /// The loop's own methods are called on its thread, or before it runs. A precondition, not an
    /// assertion: release builds keep it (as `NIOLoopBound` does), since a call from another thread
    /// would race on state that has no lock.
    private func checkThread() {
        precondition(thread.load(ordering: .acquiring) == 0 || inLoop, "called off the loop's thread")
    }

    // MARK: Descriptors (the loop's thread)

    public func register(_ descriptor: Int32, events: UInt32, _ handler: any LoopHandler) throws(LoopError) {
        checkThread()
        nextRegistration &+= 1
        var event = epoll_event(events: events, data: Self.data(descriptor, nextRegistration))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event) == 0 else { throw .system("epoll_ctl", errno) }
        let index = Int(descriptor)
        if index >= handlers.count { handlers.append(contentsOf: repeatElement(Slot(), count: max(index + 1 - handlers.count, handlers.count))) }
        handlers[index] = Slot(registration: nextRegistration, handler: handler)
    }

    /// What the loop watches `descriptor` for from now on. It fails only for a descriptor the kernel
    /// no longer knows (closed behind the loop's back): its owner treats that as the connection's end.
    public func change(_ descriptor: Int32, events: UInt32) throws(LoopError) {
        checkThread()
        guard let registration = registration(of: descriptor) else { return }
        var event = epoll_event(events: events, data: Self.data(descriptor, registration))
        guard epoll_ctl(epoll, EPOLL_CTL_MOD, descriptor, &event) == 0 else { throw .system("epoll_ctl", errno) }
    }

    private func registration(of descriptor: Int32) -> UInt32? {
        let index = Int(descriptor)
        guard index >= 0, index < handlers.count, handlers[index].handler != nil else { return nil }
        return handlers[index].registration
    }

    private static func data(_ descriptor: Int32, _ registration: UInt32) -> epoll_data_t {
        epoll_data_t(u64: UInt64(registration) << 32 | UInt64(UInt32(bitPattern: descriptor)))
    }

    /// The descriptor leaves the loop (before its owner closes it).
    public func forget(_ descriptor: Int32) {
        checkThread()
        guard registration(of: descriptor) != nil else { return }
        handlers[Int(descriptor)] = Slot()
        // Every owner forgets its descriptor before it closes it: a failure here means the loop
        // and the kernel disagree on what is watched, and events would reach the wrong handler.
        let removed = epoll_ctl(epoll, EPOLL_CTL_DEL, descriptor, nil)
        precondition(removed == 0, "epoll_ctl(EPOLL_CTL_DEL) failed: errno \(errno)")
    }

    // MARK: Timers (the loop's thread)

    /// `body` runs on the loop `nanoseconds` from now, unless cancelled first.
    @discardableResult
    public func schedule(in nanoseconds: UInt64, _ body: @escaping () -> Void) -> Timer {
        let (deadline, overflow) = Self.now.addingReportingOverflow(nanoseconds)
        return schedule(at: overflow ? .max : deadline, body)
    }

    /// `body` runs on the loop at `deadline` (`EpollLoop.now`'s clock), unless cancelled first.
    @discardableResult
    public func schedule(at deadline: UInt64, _ body: @escaping () -> Void) -> Timer {
        checkThread()
        nextTimer += 1
        timers.insert(deadline: deadline, id: nextTimer)
        timerBodies[nextTimer] = body
        if deadline < armedFor { arm(deadline) }
        return Timer(id: nextTimer)
    }

    /// Timers scheduled and not yet come up, cancelled ones included (the tests watch it stay small).
    var timersPending: Int { timers.count }

    /// A cancelled timer's body is dropped now; its place in the heap goes when it comes up.
    public func cancel(_ timer: Timer) {
        guard timerBodies.removeValue(forKey: timer.id) != nil else { return }
        // Once the cancelled outnumber the live (and are more than a few), the heap keeps the live
        // only: connections that come and go each leave a cancelled timeout, which would otherwise
        // stay until its deadline, an idle timeout's worth of connections.
        cancelledInHeap += 1
        if cancelledInHeap > 1024, cancelledInHeap > timerBodies.count {
            timers.keep { timerBodies[$0.id] != nil }
            cancelledInHeap = 0
        }
    }

    private func arm(_ deadline: UInt64) {
        armedFor = deadline
        var setting = itimerspec()
        // Zero disarms a timerfd: a deadline already past fires at the next nanosecond.
        let at = max(deadline, 1)
        setting.it_value = timespec(tv_sec: Int(at / 1_000_000_000), tv_nsec: Int(at % 1_000_000_000))
        // It fails only for values out of range, which the clamp above rules out: a timer that
        // silently never fires would leave every timeout of the loop unenforced.
        let set = timerfd_settime(timerDescriptor, Int32(TFD_TIMER_ABSTIME), &setting, nil)
        precondition(set == 0, "timerfd_settime failed: errno \(errno)")
    }

    private func fireTimers() {
        var expirations: UInt64 = 0
        _ = read(timerDescriptor, &expirations, 8)
        armedFor = .max
        // The turn's clock moves to now: a timeout that compares its end with `time` must see the
        // time its timer fired at, or one whose end fell inside the turn sleeps again until an end
        // already past, pops at once, and the loop never leaves this function.
        turnBegan = Self.now
        let now = turnBegan
        while let next = timers.first, next.deadline <= now {
            timers.removeFirst()
            if let body = timerBodies.removeValue(forKey: next.id) {
                body()
            } else {
                cancelledInHeap = max(0, cancelledInHeap - 1)
            }
        }
        // Cancelled ones at the top are dropped rather than armed for.
        while let next = timers.first, timerBodies[next.id] == nil {
            timers.removeFirst()
            cancelledInHeap = max(0, cancelledInHeap - 1)
        }
        if let next = timers.first { arm(next.deadline) }
    }

    // MARK: From any thread

    /// `work` runs on the loop's thread, in the order handed in.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        let stopping = inbox.withLockedValue { inbox in
            if !inbox.stopping { inbox.work.append(work) }
            return inbox.stopping
        }
        guard !stopping else { return }
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    /// `run` returns after the work handed in before this call; later work is dropped.
    public func stop() {
        inbox.withLockedValue { $0.stopping = true }
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    /// Runs the loop on the calling thread until `stop`.
    public func run() {
        thread.store(pthread_self(), ordering: .releasing)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), -1)
            guard count >= 0 else {
                precondition(errno == EINTR, "epoll_wait failed: errno \(errno)")
                continue
            }
            guard handle(events, count: Int(count)) else { return }
        }
    }

    /// Runs what is ready now (events, timers due, work handed in) on the calling thread, until
    /// nothing is: a test drives a loop without a thread of its own this way, a step at a time.
    public func runPending() {
        thread.store(pthread_self(), ordering: .releasing)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), 0)
            guard count > 0, handle(events, count: Int(count)) else { return }
        }
    }

    /// False once stopped.
    private func handle(_ events: [epoll_event], count: Int) -> Bool {
        turnBegan = Self.now
        for index in 0..<count {
            let descriptor = Int32(bitPattern: UInt32(truncatingIfNeeded: events[index].data.u64))
            if descriptor == wakeup {
                guard runInbox() else { return false }
            } else if descriptor == timerDescriptor {
                fireTimers()
            } else {
                let slot = Int(descriptor)
                guard slot >= 0, slot < handlers.count, let handler = handlers[slot].handler,
                    handlers[slot].registration == UInt32(truncatingIfNeeded: events[index].data.u64 >> 32)
                else { continue }
                handler.ready(events[index].events)
            }
        }
        return true
    }

    /// False once stopped.
    private func runInbox() -> Bool {
        var count: UInt64 = 0
        _ = read(wakeup, &count, 8)
        let (work, stopping) = inbox.withLockedValue { inbox in
            defer { inbox.work.removeAll() }
            return (inbox.work, inbox.stopping)
        }
        for item in work { item() }
        return !stopping
    }
}

/// Why the loop or one of its sockets could not do what was asked.
public enum LoopError: Error, Equatable, CustomStringConvertible {
    case system(String, Int32)
    case tls(String)

    public var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        case .tls(let why): "TLS: \(why)"
        }
    }
}
