import CEpoll
import Glibc

/// A loop's own thread: it runs the loop until `stop`, and `join` waits for it to end.
public final class LoopThread: Sendable {
    public let loop: EpollLoop
    private let thread: pthread_t

    /// A new loop, running on a new thread named `name` (at most 15 bytes show in `top`).
    public init(name: String) throws(LoopError) {
        let loop = try EpollLoop()
        let body = Unmanaged.passRetained(loop)
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { argument in
                let loop = Unmanaged<EpollLoop>.fromOpaque(argument!).takeRetainedValue()
                loop.run()
                return nil
            }, body.toOpaque())
        guard created == 0 else {
            body.release()
            throw .system("pthread_create", created)
        }
        pthread_setname_np(thread, String(name.prefix(15)))
        self.loop = loop
        self.thread = thread
    }

    /// Stops the loop (after the work handed in before) and waits for its thread to end.
    public func stopAndJoin() {
        loop.stop()
        pthread_join(thread, nil)
    }
}

/// A value of one loop's, handed through a `@Sendable` closure that runs on that loop
/// (`EpollLoop.execute`): only the loop's thread reads it.
public struct LoopBound<Value>: @unchecked Sendable {
    private let held: Value
    /// The loop whose thread reads it (and to which work about it is handed).
    public let loop: EpollLoop

    public init(_ value: Value, on loop: EpollLoop) {
        held = value
        self.loop = loop
    }

    /// A precondition in every build, as `NIOLoopBound`'s: a read from another thread would race.
    public var value: Value {
        precondition(loop.inLoop, "a loop's value read off its thread")
        return held
    }
}
