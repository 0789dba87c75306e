import NIOCore

/// A timeout that moves with every request but is rarely scheduled, on one loop: moving its end
/// later schedules nothing; the one timer, when it fires before the end, sleeps again until the
/// end. A busy connection thus costs no timer work per request, and the loop's heap holds one
/// timer per connection, not a cancelled one per request.
public final class LoopTimeout {
    private unowned let loop: EpollLoop
    private var end: UInt64?
    private var timer: EpollLoop.Timer?
    private var firesAt = UInt64.max
    /// Runs when an end passes unmoved; it looks at its owner's state when it runs. Settable, so
    /// that an owner can hold its timeouts as constants and give them closures over itself once
    /// it is initialised.
    public var expired: () -> Void

    public init(on loop: EpollLoop, expired: @escaping () -> Void = {}) {
        self.loop = loop
        self.expired = expired
    }

    /// The timeout now ends at `end` (`loop.time`'s clock; nil: it does not run).
    public func move(to end: UInt64?) {
        self.end = end
        guard let end, timer == nil || end < firesAt else { return }
        schedule(at: end)
    }

    /// Ends `nanoseconds` from now.
    public func move(in nanoseconds: UInt64) {
        let (end, overflow) = loop.time.addingReportingOverflow(nanoseconds)
        move(to: overflow ? .max : end)
    }

    deinit {
        if let timer { loop.cancel(timer) }
    }

    /// Stops it for good: nothing stays scheduled to keep its owner alive.
    public func cancel() {
        end = nil
        if let timer { loop.cancel(timer) }
        timer = nil
    }

    private func schedule(at when: UInt64) {
        if let timer { loop.cancel(timer) }
        firesAt = when
        // Unowned, not weak (a weak reference would give the timeout a side table, and its owner's
        // every retain a slow path): the timer goes with it (`deinit`).
        timer = loop.schedule(at: when) { [unowned self] in
            timer = nil
            guard let end else { return }
            if end > loop.time { return schedule(at: end) }
            self.end = nil
            expired()
        }
    }
}

extension Duration {
    /// Nanoseconds for the loop's timers (`EpollLoop.schedule(in:)`, `LoopTimeout.move(in:)`);
    /// a negative duration is none, one past the range is the longest.
    public var loopNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}

extension TimeAmount {
    /// As `Duration.loopNanoseconds`, for NIO's amounts (the listeners' shared timeouts).
    public var loopNanoseconds: UInt64 { UInt64(max(0, nanoseconds)) }
}
