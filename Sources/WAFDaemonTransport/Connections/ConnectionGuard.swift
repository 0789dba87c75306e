/// One connection's guard as a value, the same on every listener (the socket API's NIO pipeline
/// and the proxy's loop): whether the peer was let in and where the listener's limits counted it,
/// which phase the connection is in and when that phase's timeout ends (fixed as the phase
/// begins: a body that drips does not move it), a stop's drain window, and a clean close. Each
/// event returns what the transport must do; the transport performs it and keeps one timer at
/// `deadline`. It does no I/O and reads no clock: `now` comes with each event, in nanoseconds of
/// the transport's monotonic clock. Tested without a socket (`ConnectionGuardTests`).
package struct ConnectionGuard: Sendable {
    package enum Phase: Equatable, Sendable {
        /// Between requests: the idle timeout runs (after a stop began, the drain window).
        case idle
        /// Part of a request arrived: the request timeout runs (408 at its end).
        case receiving
        /// A request is being answered (or streamed): no timeout.
        case serving
        /// Closing cleanly: what is queued goes out, then FIN; what the peer still sends is read
        /// and dropped until it closes too or the linger time passes.
        case lingering
    }

    /// What the transport does after an event.
    package enum Action: Equatable, Sendable {
        case none
        /// Close cleanly (then `closing`).
        case closeCleanly
        /// Answer `error` in front of everything else, then close cleanly.
        case reject(DaemonError)
        /// Close at once: a connection over the listener's limits, or a linger that ran out.
        case close
    }

    package private(set) var phase = Phase.idle
    /// When the phase's timeout ends (nil: none).
    package private(set) var deadline: UInt64?
    /// After a stop began (nil before), until when a kept-alive connection between requests may
    /// still send one; once it began, a connection closes when its answer is done.
    private var drainUntil: UInt64?
    /// Whom the listener's limits counted the connection as, and whether its lists let it in;
    /// nil until admitted, and again once the count is given back (`ended`).
    package private(set) var admitted: (peer: ListenerLimits.Peer, allowed: Bool)?

    /// How long a clean close waits for the peer to close its side.
    package static let linger: UInt64 = 1_000_000_000
    /// A kept-alive client under load sends its next request within milliseconds: after a stop
    /// began it gets an answer instead of a close it must retry after.
    package static let drainWindow: UInt64 = 250_000_000

    package init() {}

    /// The connection was accepted; who the peer is may not be known yet. Until it is, it has
    /// the request timeout, as a refused peer has.
    package mutating func accepted(now: UInt64, settings: ConnectionSettings) {
        deadline = Self.later(now, settings.requestTimeout.nanoseconds)
    }

    /// The listener's limits decided (`ListenerLimits.admit`): nil, the connection is over them and
    /// closes at once, holding nothing meanwhile (TENANT-6); else the idle time starts (a refused
    /// peer's request time: it has that long to ask for its 403).
    package mutating func admitted(_ admission: (peer: ListenerLimits.Peer, allowed: Bool)?, now: UInt64, settings: ConnectionSettings) -> Action {
        guard let admission else {
            phase = .lingering
            deadline = nil
            return .close
        }
        admitted = admission
        if phase == .idle { enterIdle(now, settings) }
        return .none
    }

    /// Bytes arrived from the peer: false when they are to be dropped (the connection is closing).
    package mutating func bytesArrived(now: UInt64, settings: ConnectionSettings) -> Bool {
        switch phase {
        case .lingering: return false
        case .idle:
            phase = .receiving
            deadline = Self.later(now, settings.requestTimeout.nanoseconds)
        case .receiving, .serving: break
        }
        return true
    }

    /// A request is being served (its head, or all of it, arrived): no timeout applies.
    package mutating func requestStarted() {
        guard phase != .lingering else { return }
        phase = .serving
        deadline = nil
    }

    /// An answer is complete: idle time starts, unless part of the next request is already there
    /// (`partial`: its request time then); once a stop began, a connection with nothing pending closes.
    package mutating func responseFinished(partial: Bool, now: UInt64, settings: ConnectionSettings) -> Action {
        guard phase != .lingering else { return .none }
        if partial {
            phase = .receiving
            deadline = Self.later(now, settings.requestTimeout.nanoseconds)
            return .none
        }
        enterIdle(now, settings)
        return drainUntil == nil ? .none : .closeCleanly
    }

    /// The daemon stops (`deadline`: when everything must be over): what is under way is answered,
    /// then closed; a connection between requests gets the drain window for its next one.
    package mutating func stopBegan(now: UInt64, deadline stop: UInt64, settings: ConnectionSettings) {
        drainUntil = min(Self.later(now, Self.drainWindow), stop)
        if phase == .idle { enterIdle(now, settings) }
    }

    /// A clean close begins: false when one already has. What is `queued` may take the idle time to go out.
    package mutating func closing(now: UInt64, queued: Bool, settings: ConnectionSettings) -> Bool {
        guard phase != .lingering else { return false }
        phase = .lingering
        deadline = queued ? Self.later(now, settings.idleTimeout.nanoseconds) : Self.later(now, Self.linger)
        return true
    }

    /// The connection's FIN went out: the peer has the linger time to close its side.
    package mutating func outputClosed(now: UInt64) {
        guard phase == .lingering else { return }
        deadline = Self.later(now, Self.linger)
    }

    /// The timer reached `deadline`.
    package mutating func expired() -> Action {
        deadline = nil
        switch phase {
        case .idle: return .closeCleanly
        case .receiving:
            phase = .serving
            return .reject(.timedOut)
        case .serving: return .none
        case .lingering: return .close
        }
    }

    /// The connection is gone: the listener's count to give back, once.
    package mutating func ended() -> (peer: ListenerLimits.Peer, allowed: Bool)? {
        defer { admitted = nil }
        phase = .lingering
        deadline = nil
        return admitted
    }

    private mutating func enterIdle(_ now: UInt64, _ settings: ConnectionSettings) {
        phase = .idle
        let allowed = admitted?.allowed ?? false
        deadline = drainUntil ?? Self.later(now, (allowed ? settings.idleTimeout : settings.requestTimeout).nanoseconds)
    }

    /// `now` + `nanoseconds`, saturating; a negative amount is none.
    private static func later(_ now: UInt64, _ nanoseconds: Int64) -> UInt64 {
        later(now, UInt64(max(0, nanoseconds)))
    }

    private static func later(_ now: UInt64, _ nanoseconds: UInt64) -> UInt64 {
        let (sum, overflow) = now.addingReportingOverflow(nanoseconds)
        return overflow ? .max : sum
    }
}
