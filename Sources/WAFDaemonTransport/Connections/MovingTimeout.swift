import NIOCore

/// A timeout that moves with every request but is rarely scheduled: moving its end later schedules
/// nothing; the one task, when it fires before the end, sleeps again until the end. A busy
/// connection thus costs no timer work per request (scheduling and cancelling a task per request
/// was a tenth of the proxy's time). Used on its channel's event loop only.
package final class MovingTimeout {
    private var end: NIODeadline?
    private var task: Scheduled<Void>?
    private var firesAt = NIODeadline.distantFuture

    package init() {}

    /// The timeout now ends at `end` (nil: it does not run). `expired` runs when an end passes
    /// unmoved; the one given when the task was scheduled is used, so give the same every time and
    /// let it look at its owner's state when it runs. It is made only when a task is scheduled:
    /// a closure made at every move was an allocation per request.
    package func move(to end: NIODeadline?, on eventLoop: any EventLoop, expired: @autoclosure () -> (() -> Void)) {
        self.end = end
        guard let end, task == nil || end < firesAt else { return }
        schedule(at: end, on: eventLoop, expired())
    }

    /// No end for now: the task, if any, finds none when it fires and stops.
    package func disarm() {
        end = nil
    }

    /// Stops it for good (the connection closed): nothing stays scheduled to keep its owner alive.
    package func cancel() {
        end = nil
        task?.cancel()
        task = nil
    }

    private func schedule(at when: NIODeadline, on eventLoop: any EventLoop, _ expired: @escaping () -> Void) {
        task?.cancel()
        firesAt = when
        task = eventLoop.assumeIsolated().scheduleTask(deadline: when) { [self] in
            task = nil
            guard let end else { return }
            if end > eventLoop.now { return schedule(at: end, on: eventLoop, expired) }
            self.end = nil
            expired()
        }
    }
}
