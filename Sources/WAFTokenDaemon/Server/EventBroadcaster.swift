import NIOConcurrencyHelpers
import NIOCore
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
final class EventBroadcaster: Sendable {
    struct Subscriber: Sendable {
        let eventLoop: any EventLoop
        let gate: LoopGate
        /// Whether the stream gets events of this provider.
        let wants: @Sendable (String) -> Bool
        /// Writes one frame; called on `eventLoop`.
        let send: @Sendable (ByteBuffer) -> Void
        /// Ends the stream (shutdown); called on `eventLoop`.
        let finish: @Sendable () -> Void
    }

    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0
        var keepAlive: RepeatedTask?
    }

    static let keepAliveInterval = TimeAmount.seconds(15)
    private let state = NIOLockedValueBox(State())
    private let metrics: DaemonMetrics

    init(metrics: DaemonMetrics) {
        self.metrics = metrics
    }

    var subscriberCount: Int { state.withLockedValue { $0.subscribers.count } }

    func subscribe(_ subscriber: Subscriber) -> UInt64 {
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
        metrics.eventSubscribers.record(count)
        return id
    }

    func unsubscribe(_ id: UInt64) {
        let count = state.withLockedValue { state in
            state.subscribers[id] = nil
            if state.subscribers.isEmpty {
                state.keepAlive?.cancel()
                state.keepAlive = nil
            }
            return state.subscribers.count
        }
        metrics.eventSubscribers.record(count)
    }

    /// Sends `event` of `provider` to every stream that wants it, if it is one the API announces.
    func publish(_ event: WAFProviderEvent, provider: String) {
        if let frame = Self.frame(event, provider: provider) { publish(raw: frame, provider: provider) }
    }

    /// Ends every stream (graceful stop).
    func finishAll() {
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

    static func frame(_ event: WAFProviderEvent, provider: String) -> String? {
        switch event {
        case .tokenUpdated(let token, let origin):
            frame("token", TokenEvent(token, origin: origin, provider: provider))
        case .lifecycleChanged(let lifecycle):
            frame("lifecycle", LifecycleBody(lifecycle, provider: provider))
        case .refreshFailed(let error, let failures, let next):
            frame("error", ErrorEvent(
                provider: provider, error: error.name, message: error.description, consecutiveFailures: failures,
                nextAttemptAt: next.map(APIResponse.timeStyle.format)))
        case .refreshHeld, .callbackFailed, .tokenDropped:
            nil
        }
    }

    static func frame(_ name: String, _ body: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = String(decoding: try! encoder.encode(body), as: UTF8.self)
        return "event: \(name)\ndata: \(json)\n\n"
    }

    struct TokenEvent: Encodable {
        let provider: String
        let value: String
        let fetchedAt: String
        let fingerprint: String
        let origin: String

        init(_ token: WAFToken, origin: WAFTokenOrigin, provider: String) {
            self.provider = provider
            value = token.value
            fetchedAt = APIResponse.timeStyle.format(token.fetchedAt)
            fingerprint = token.fingerprint
            self.origin = origin.rawValue
        }
    }

    struct ErrorEvent: Encodable {
        let provider: String
        let error: String
        let message: String
        let consecutiveFailures: Int
        let nextAttemptAt: String?
    }
}

/// `lifecycle` as the status and the events show it (an event names its provider).
struct LifecycleBody: Encodable {
    let provider: String?
    let state: String
    let profile: String
    let active: Bool
    let paused: Bool

    init(_ lifecycle: WAFProviderStatus.Lifecycle, provider: String? = nil) {
        self.provider = provider
        state = lifecycle.state.rawValue
        profile = lifecycle.profile.rawValue
        active = lifecycle.active
        paused = lifecycle.paused
    }
}
