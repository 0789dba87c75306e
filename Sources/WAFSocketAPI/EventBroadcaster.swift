import NIOConcurrencyHelpers
import NIOCore
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Fans provider events out to the `GET /v1/events` streams (Server-Sent Events), each event
/// naming its provider, each stream getting the providers it asked for and may see (MULTI-3).
///
/// Each event is encoded once; each subscriber writes it on its own event loop. While anyone
/// listens, a comment goes out every 15 s so that proxies and idle timers keep the stream open;
/// with nobody listening there is no timer at all.
package final class EventBroadcaster: Sendable {
    package struct Subscriber: Sendable {
        package let eventLoop: any EventLoop
        package let gate: LoopGate
        /// Whether the stream gets events of this provider, asked at each event (the peer may have
        /// lost access to it in a reload).
        package let wants: @Sendable (String) -> Bool
        /// Whether the stream may stay open after a reload: false ends it (a stream of one
        /// provider whose peer may no longer use it, TENANT-3).
        package let stillAllowed: @Sendable () -> Bool
        /// Writes one frame; called on `eventLoop`.
        package let send: @Sendable (ByteBuffer) -> Void
        /// Ends the stream (shutdown); called on `eventLoop`.
        package let finish: @Sendable () -> Void
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var keepAlive: RepeatedTask?
    }

    package static let keepAliveInterval = TimeAmount.seconds(15)
    private let state = NIOLockedValueBox(State())
    private let metrics: any APIMetrics
    /// Whose identity a token event must be of to go out (TENANT-2).
    private let providers: ProviderSet

    package init(metrics: any APIMetrics, providers: ProviderSet) {
        self.metrics = metrics
        self.providers = providers
    }

    package var subscriberCount: Int { state.withLockedValue { $0.subscribers.count } }

    package func subscribe(_ subscriber: Subscriber) -> UInt64 {
        let (id, count) = state.withLockedValue { state in
            state.nextID += 1
            state.subscribers[state.nextID] = subscriber
            if state.keepAlive == nil {
                state.keepAlive = subscriber.eventLoop.scheduleRepeatedTask(
                    initialDelay: Self.keepAliveInterval, delay: Self.keepAliveInterval
                ) { [weak self] _ in self?.publish(raw: ": keep-alive\n\n", provider: nil) }
            }
            return (state.nextID, state.subscribers.count)
        }
        metrics.eventSubscribersChanged(count)
        return id
    }

    package func unsubscribe(_ id: UInt64) {
        let count = state.withLockedValue { state in
            state.subscribers[id] = nil
            if state.subscribers.isEmpty {
                state.keepAlive?.cancel()
                state.keepAlive = nil
            }
            return state.subscribers.count
        }
        metrics.eventSubscribersChanged(count)
    }

    /// Sends `event` of `provider` to every stream that wants it, if it is one the API announces. A
    /// token goes out only as the token of the identity its entry answers for: while a reload
    /// switches a provider's identity the entry still holds the old lists, and the new identity's
    /// token waits for the reload's end, which announces it (TENANT-2).
    package func publish(_ event: WAFProviderEvent, provider: String) {
        if case .tokenUpdated(let token, _) = event, providers.named(provider)?.currentToken?.token != token { return }
        if let frame = Self.frame(event, provider: provider) { publish(raw: frame, provider: provider) }
    }

    /// An event of the daemon's own about `provider` (`hook`, `canary`): its name and JSON body,
    /// to the streams that may see that provider.
    package func publish(named name: String, _ body: some Encodable, provider: String) {
        publish(raw: Self.frame(name, body), provider: provider)
    }

    /// After a reload: ends the streams whose peer may no longer use what they asked for; the
    /// others go on, each event still checked against the new lists.
    package func reauthorize() {
        let subscribers = state.withLockedValue { Array($0.subscribers.values) }
        for subscriber in subscribers where !subscriber.stillAllowed() { subscriber.gate.execute(on: subscriber.eventLoop) { subscriber.finish() } }
    }

    /// Ends every stream (graceful stop).
    package func finishAll() {
        let subscribers = state.withLockedValue { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.gate.execute(on: subscriber.eventLoop) { subscriber.finish() } }
    }

    /// A frame of `provider` to the streams that want it; with no provider (a keep-alive) to all.
    private func publish(raw frame: String, provider: String?) {
        let subscribers = state.withLockedValue { Array($0.subscribers.values) }.filter { subscriber in provider.map(subscriber.wants) ?? true }
        guard !subscribers.isEmpty else { return }
        let buffer = ByteBuffer(string: frame)
        for subscriber in subscribers { subscriber.gate.execute(on: subscriber.eventLoop) { subscriber.send(buffer) } }
    }

    // MARK: Frames

    package static func frame(_ event: WAFProviderEvent, provider: String) -> String? {
        switch event {
        case .tokenUpdated(let token, let origin):
            frame("token", TokenEvent(token, origin: origin, provider: provider))
        case .lifecycleChanged(let lifecycle):
            frame("lifecycle", LifecycleBody(lifecycle, provider: provider))
        case .refreshFailed(let error, let failures, let next):
            frame(
                "error",
                ErrorEvent(
                    provider: provider, error: error.name, message: error.description, consecutiveFailures: failures,
                    nextAttemptAt: next.map(HTTPReply.timeStyle.format)))
        case .refreshHeld, .callbackFailed, .tokenDropped:
            nil
        }
    }

    package static func frame(_ name: String, _ body: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = String(decoding: try! encoder.encode(body), as: UTF8.self)
        return "event: \(name)\ndata: \(json)\n\n"
    }

    package struct TokenEvent: Encodable {
        package let provider: String
        package let value: String
        package let fetchedAt: String
        package let fingerprint: String
        package let origin: String

        package init(_ token: WAFToken, origin: WAFTokenOrigin, provider: String) {
            self.provider = provider
            value = token.value
            fetchedAt = HTTPReply.timeStyle.format(token.fetchedAt)
            fingerprint = token.fingerprint
            self.origin = origin.rawValue
        }
    }

    package struct ErrorEvent: Encodable {
        package let provider: String
        package let error: String
        package let message: String
        package let consecutiveFailures: Int
        package let nextAttemptAt: String?
    }
}

/// `lifecycle` as the status and the events show it (an event names its provider).
package struct LifecycleBody: Encodable {
    package let provider: String?
    package let state: String
    package let profile: String
    package let active: Bool
    package let paused: Bool

    package init(_ lifecycle: WAFProviderStatus.Lifecycle, provider: String? = nil) {
        self.provider = provider
        state = lifecycle.state.rawValue
        profile = lifecycle.profile.rawValue
        active = lifecycle.active
        paused = lifecycle.paused
    }
}
