import NIOCore
import WAFHTTPWire

/// The machine's states: each carries exactly what varies in it, the upstream connection and a
/// held answer included, so that a combination that cannot happen cannot be written down.
extension ProxyConnectionMachine {
    enum State {
        /// Between requests: the client's next bytes are a head.
        case idle
        case active(Exchange)
        /// Nothing more is read: an error was answered, the answer said close, or the client left.
        case closed
    }

    /// The request in progress. A class the state holds once, changed in place: as a value in the
    /// state's payload it was copied out and back at every event and every question the driver
    /// asks (several times a request, 8 % of the proxy's instructions by callgrind). The machine
    /// is its only holder; a request's end drops it.
    final class Exchange {
        /// The driver's bytes and handles for it.
        let request: Request
        /// How the client frames the request's body.
        let framing: HTTPFraming
        /// The client may send another request after this one: it asked to keep the connection,
        /// and not for an upgrade.
        let keepAlive: Bool
        /// The most of a body kept for a replay (`proxy.replayBufferBytes`).
        let replayLimit: Int
        /// Its method is idempotent (RFC 9110 §9.2.2): it may go again after a kept-alive
        /// connection closed on it unanswered, whether or not the upstream read it (TENANT-15).
        let idempotent: Bool
        @exclusivity(unchecked) var body: Body
        @exclusivity(unchecked) var step: Step

        init(request: Request, framing: HTTPFraming, keepAlive: Bool, replayLimit: Int, idempotent: Bool, body: Body, step: Step) {
            self.request = request
            self.framing = framing
            self.keepAlive = keepAlive
            self.replayLimit = replayLimit
            self.idempotent = idempotent
            self.body = body
            self.step = step
        }
    }

    /// The request's body, as the driver keeps it.
    enum Body: Equatable {
        /// Kept whole for a replay: `bytes` so far; `complete` once read to its end.
        case kept(bytes: Int, complete: Bool)
        /// Goes as it arrives and is never replayed; `waiting`: bytes kept until the upstream is there.
        case streaming(waiting: Int, complete: Bool)

        var complete: Bool {
            switch self {
            case .kept(_, let complete), .streaming(_, let complete): complete
            }
        }
    }

    /// How often the request went upstream, and why it went again: once more after a kept-alive
    /// connection closed on it, once more for a challenge, each at most once.
    enum Sendings: Equatable {
        case once, retried, replayed, replayedAndRetried

        var mayRetry: Bool { self == .once || self == .replayed }
        var mayReplay: Bool { self == .once || self == .retried }
        var afterRetry: Sendings { self == .once ? .retried : .replayedAndRetried }
        var afterReplay: Sendings { self == .once ? .replayed : .replayedAndRetried }
    }

    /// An upstream connection attached to the request; its head went with it.
    struct Upstream: Equatable {
        let connection: Connection
        let reused: Bool
        /// The upstream got the whole request: only then can its connection be reused.
        var requestComplete: Bool

        static func == (a: Upstream, b: Upstream) -> Bool {
            a.connection === b.connection && a.reused == b.reused && a.requestComplete == b.requestComplete
        }
    }

    /// A challenge's answer, kept while the replay is decided: passed on as the upstream sent it
    /// if none happens.
    struct HeldAnswer {
        let head: HTTPHead
        let framing: HTTPFraming
        /// How its body goes to the client.
        let clientFraming: ProxyRules.ClientFraming
        var body: ByteBuffer
    }

    /// Where the request is on its way upstream and back.
    enum Step {
        /// Its body arrives, kept, before it goes.
        case reading
        /// Waiting for a first token (`proxy.tokenWaitSec`).
        case waitingForToken(Sendings)
        case connecting(Sendings)
        /// On `upstream` (all of it, or its head and the body so far); no answer yet.
        case sent(Upstream, Sendings)
        /// A challenge's answer arrives, held. (The three cases with a held answer are boxed: the
        /// step is copied whenever it is matched, and a held answer would make each copy of the
        /// common steps several times larger.)
        indirect case holding(Upstream, Sendings, HeldAnswer)
        /// A challenge's whole answer is held, its connection let go: passed on, replayed, or a
        /// refresh first.
        indirect case challenged(HeldAnswer, Sendings)
        /// Waiting for the new token a challenge asked for.
        indirect case refreshing(HeldAnswer, Sendings)
        /// The upstream's answer goes to the client as it arrives. `keeps`: the connection carries
        /// another request after it, decided as its head went so that the head says what follows.
        case answering(Upstream, keeps: Bool)

        /// The upstream connection the request is on, if any.
        var upstream: Upstream? {
            switch self {
            case .sent(let upstream, _), .holding(let upstream, _, _), .answering(let upstream, _): upstream
            case .reading, .waitingForToken, .connecting, .challenged, .refreshing: nil
            }
        }

        var name: String {
            switch self {
            case .reading: "reading"
            case .waitingForToken: "waitingForToken"
            case .connecting: "connecting"
            case .sent: "sent"
            case .holding: "holding"
            case .challenged: "challenged"
            case .refreshing: "refreshing"
            case .answering: "answering"
            }
        }
    }
}

extension ProxyConnectionMachine.Exchange {
    var replayable: Bool {
        if case .kept = body { return true }
        return false
    }

    /// The guard has heard that the request is being served (its request timeout stopped): once
    /// the request was read whole, or its answer began.
    var serving: Bool {
        if body.complete { return true }
        if case .answering = step { return true }
        return false
    }

    /// How the body is framed upstream: a kept body by its length, a streamed one as the client
    /// framed it.
    var upstreamFraming: ProxyRules.Framing {
        switch body {
        case .kept(let bytes, _): return bytes > 0 ? .length(bytes) : .none
        case .streaming:
            if case .length(let length) = framing { return .length(length) }
            return .chunked
        }
    }
}
