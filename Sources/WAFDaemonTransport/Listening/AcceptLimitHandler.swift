import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// On a listening channel: at the process's descriptor limit, stops accepting instead of spinning.
///
/// A listener built with `ServerBootstrap.bind` has no accept back-off: with every descriptor in
/// use, each readable event is an `accept4` that fails with `EMFILE` while the connection stays in
/// the backlog, so the loop tried again at once (measured: two threads at 93–100 % of a core while
/// 150 clients waited under a limit of 64). NIO's own `AcceptBackoffHandler` holds back the next
/// `read`, but a failed accept leaves the channel's read pending and the socket registered, so the
/// loop still wakes for it. Here the first such failure turns the listener's `autoRead` off, which
/// takes the socket out of the loop's interest: the connections already open are served as before;
/// accepting resumes as soon as one of them closes (`descriptorsFreed`), or after a back-off (50 ms,
/// doubling to 1 s) in case descriptors were freed elsewhere. The condition is logged once when it
/// begins and once when it ends, never per attempt.
package final class AcceptLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = any Channel

    package static let firstBackoff = TimeAmount.milliseconds(50)
    package static let longestBackoff = TimeAmount.seconds(1)

    private let listener: String
    private let logger: Logger
    private var context: ChannelHandlerContext?
    /// Since when accepting fails for want of descriptors; nil while it works.
    private var limitedSince: NIODeadline?
    private var refusals = 0
    private var backoff = firstBackoff
    private var retry: Scheduled<Void>?

    package init(listener: String, logger: Logger) {
        self.listener = listener
        self.logger = logger
    }

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    package func handlerRemoved(context: ChannelHandlerContext) {
        retry?.cancel()
        self.context = nil
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let since = limitedSince {
            Self.logLifted(listener: listener, seconds: Double((NIODeadline.now() - since).nanoseconds) / 1e9, refusals: refusals, logger: logger)
            limitedSince = nil
            refusals = 0
            backoff = Self.firstBackoff
        }
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let code = (error as? IOError)?.errnoCode, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(code) else {
            return context.fireErrorCaught(error)
        }
        refusals += 1
        if limitedSince == nil {
            limitedSince = .now()
            Self.logReached(listener: listener, error: code, logger: logger)
        } else {
            backoff = min(backoff * 2, Self.longestBackoff)
        }
        // Out of the loop's interest until it is time to try again.
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        retry?.cancel()
        retry = context.eventLoop.assumeIsolated().scheduleTask(in: backoff) { [self] in resume() }
    }

    package func channelInactive(context: ChannelHandlerContext) {
        retry?.cancel()
        retry = nil
        context.fireChannelInactive()
    }

    /// A connection closed: a descriptor is free, so accepting may work again at once.
    package func descriptorsFreed() {
        guard limitedSince != nil else { return }
        backoff = Self.firstBackoff
        resume()
    }

    private func resume() {
        retry?.cancel()
        retry = nil
        guard let context, context.channel.isActive else { return }
        try? context.channel.syncOptions?.setOption(.autoRead, value: true)
    }

    /// The line an episode at the descriptor limit begins with, on every listener (the proxy's
    /// loops say it too): logged once per episode, never per attempt.
    package static func logReached(listener: String, error: Int32, logger: Logger) {
        logger.warning(
            "at the descriptor limit: not accepting connections until descriptors free up; the open ones are served",
            metadata: ["listener": "\(listener)", "error": "\(String(cString: strerror(error)))"])
    }

    /// The line it ends with, once accepting works again.
    package static func logLifted(listener: String, seconds: Double, refusals: Int, logger: Logger) {
        logger.notice(
            "accepting connections again",
            metadata: ["listener": "\(listener)", "seconds_at_limit": "\(Int(seconds.rounded(.up)))", "refused_attempts": "\(refusals)"])
    }
}
