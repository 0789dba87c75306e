import WAFHTTPWire

/// One proxy connection's state as a value: each thing the connection meets (a request's head or
/// body, a token, an upstream connection, the upstream's answer, a challenge, a failure, a close)
/// is an event that changes it and returns what the driver (`ProxyHandler`) must do. It does no
/// I/O and holds no timers; the request in progress is here, once: the driver's bytes and handles
/// for it (`Request`) live in the state that has a request, and nowhere else. Each state carries
/// exactly the data it needs, so a combination that cannot happen cannot be written down; an
/// event the driver cannot send in a state is a `preconditionFailure` (the model is SwiftNIO's
/// state machines). Callbacks that may come late (a token, a connection, a refresh) name their
/// request and are told when it is gone. Every path is tested directly (`ProxyConnectionMachineTests`).
struct ProxyConnectionMachine<Request: AnyObject> {
    enum State {
        /// Between requests: the client's next bytes are a head.
        case idle
        case active(Exchange)
        /// Nothing more is read: an error was answered, the answer said close, or the client left.
        case closed
    }

    /// The request in progress.
    struct Exchange {
        /// The driver's bytes and handles for it.
        let request: Request
        /// How the client frames the request's body.
        let framing: HTTPFraming
        /// The client may send another request after this one: it asked to keep the connection,
        /// and not for an upgrade.
        let keepAlive: Bool
        /// The most of a body kept for a replay (`proxy.replayBufferBytes`).
        let replayLimit: Int
        var body: Body
        var step: Step
        /// The guard heard that the request is being served: its request timeout, which bounds
        /// the head and the whole body (TENANT-6), has stopped.
        var serving = false
        var replayed = false
        /// A pooled connection that the upstream had closed is tried once more on a new one.
        var retriedClosedConnection = false
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

    /// An upstream connection attached to the request; its head went with it.
    struct Upstream: Equatable {
        let reused: Bool
        /// The upstream got the whole request: only then can its connection be reused.
        var requestComplete: Bool
    }

    /// Where the request is on its way upstream and back.
    enum Step: Equatable {
        /// Its body arrives, kept, before it goes.
        case reading
        /// Waiting for a first token (`proxy.tokenWaitSec`).
        case waitingForToken
        case connecting
        /// On `upstream` (all of it, or its head and the body so far); no answer yet.
        case sent(Upstream)
        /// A challenge's answer arrives; the driver keeps it (`held` bytes of its body so far)
        /// until the replay is decided.
        case holding(Upstream, held: Int, framing: ProxyRules.ClientFraming)
        /// A challenge's whole answer is held, its connection let go: passed on, replayed, or a
        /// refresh first (`challenged`).
        case challenged(framing: ProxyRules.ClientFraming)
        /// Waiting for the new token a challenge asked for.
        case refreshing(framing: ProxyRules.ClientFraming)
        /// The upstream's answer goes to the client as it arrives. `keeps`: the connection carries
        /// another request after it, decided as its head went so that the head says what follows.
        case answering(Upstream, keeps: Bool)
    }

    /// A challenge's answer is kept up to this size to be passed on unchanged if no replay
    /// happens; a larger one is passed on at once.
    static var maximumHeldChallenge: Int { 1 << 20 }

    /// Changed by the events only (in this file and its two extensions; a setter private to three
    /// files cannot be written).
    var state = State.idle

    /// Applies `change` to the request in progress; the driver sends these events only while there is one.
    @inline(__always)
    mutating func update<Result>(_ event: StaticString, _ change: (inout Exchange) -> Result) -> Result {
        guard case .active(var exchange) = state else { preconditionFailure("\(event) without a request") }
        defer { state = .active(exchange) }
        return change(&exchange)
    }

    /// The request in progress, if any.
    var request: Request? {
        if case .active(let exchange) = state { return exchange.request }
        return nil
    }

    /// Whether the request waits on an upstream connection it has (sent, a challenge arriving, an
    /// answer going): only then can the upstream time out.
    var waitsOnUpstream: Bool {
        if case .active(let exchange) = state { return exchange.upstream != nil }
        return false
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    // MARK: The client's bytes

    enum Reading {
        /// The next request's head.
        case head
        /// The body of the request in progress.
        case body(Request, HTTPFraming)
        /// Nothing now: the request is complete and its answer pending (bytes that follow wait), or
        /// the connection is closed.
        case nothing
    }

    /// What the client's bytes are now.
    var reading: Reading {
        switch state {
        case .idle: .head
        case .active(let exchange): exchange.body.complete ? .nothing : .body(exchange.request, exchange.framing)
        case .closed: .nothing
        }
    }

    enum Begin: Equatable {
        /// Read the body first (answering `100 Continue` when asked).
        case readBody(sendContinue: Bool)
        /// Look for a token and an upstream now, and stream the body as it arrives.
        case dispatchAndStream(sendContinue: Bool)
        /// No body: the request is complete. Tell the guard it is being served, and dispatch.
        case serve
    }

    /// A request head that passed every check.
    mutating func requestBegan(
        _ request: Request, framing: HTTPFraming, streams: Bool, keepAlive: Bool, upgrade: Bool, expectsContinue: Bool, replayLimit: Int
    ) -> Begin {
        guard case .idle = state else { preconditionFailure("a request's head while another is in progress") }
        let complete = framing == .none
        var exchange = Exchange(
            request: request, framing: framing, keepAlive: keepAlive && !upgrade, replayLimit: replayLimit,
            body: streams && !complete ? .streaming(waiting: 0, complete: false) : .kept(bytes: 0, complete: complete),
            step: streams || complete ? .waitingForToken : .reading)
        defer { state = .active(exchange) }
        if complete {
            exchange.serving = true
            return .serve
        }
        return streams ? .dispatchAndStream(sendContinue: expectsContinue) : .readBody(sendContinue: expectsContinue)
    }

    /// The request is complete, or its answer begins: true when the guard must now hear that it is
    /// being served, which stops its request timeout (a 408 must never be written over an answer).
    /// Until then that timeout bounds the head and the body together (TENANT-6).
    mutating func servingBegins() -> Bool {
        update("serving") { exchange in
            defer { exchange.serving = true }
            return !exchange.serving
        }
    }

    enum BodyPiece: Equatable {
        /// Straight to the upstream, framed as the request goes there.
        case forward(ProxyRules.Framing)
        /// Kept by the driver.
        case keep
        /// Kept, and the body outgrew the replay buffer: it streams from now on, so dispatch now.
        case keepAndDispatch
    }

    /// Whether body bytes that arrive now would be kept for a replay (the budget is asked first).
    var keepsBodyForReplay: Bool {
        if case .active(let exchange) = state, case .kept = exchange.body { return true }
        return false
    }

    /// `mayKeep`: whether the memory budget lets the driver keep these bytes for a replay; past
    /// it the body streams, as one past the replay buffer does (TENANT-12).
    mutating func bodyArrived(_ count: Int, mayKeep: Bool = true) -> BodyPiece {
        update("a request's body") { exchange in
            switch exchange.body {
            case .kept(let kept, false):
                guard kept + count > exchange.replayLimit || !mayKeep else {
                    exchange.body = .kept(bytes: kept + count, complete: false)
                    return .keep
                }
                exchange.body = .streaming(waiting: kept + count, complete: false)
                exchange.step = .waitingForToken
                return .keepAndDispatch
            case .streaming(let waiting, false):
                if exchange.upstream != nil { return .forward(exchange.upstreamFraming) }
                exchange.body = .streaming(waiting: waiting + count, complete: false)
                return .keep
            default:
                preconditionFailure("body after the request's end")
            }
        }
    }

    enum RequestEnd: Equatable {
        /// The kept request goes now: look for a token and an upstream.
        case dispatch
        /// The streamed body is all upstream: end it (a chunked one with its last chunk).
        case endUpstreamBody(chunked: Bool)
        /// The upstream is not there yet: the body ends when it is.
        case wait
    }

    /// The client's request was read to its end. (Tell the guard: `servingBegins`.)
    mutating func requestEnded() -> RequestEnd {
        update("a request's end") { exchange in
            switch exchange.body {
            case .kept(let kept, false):
                exchange.body = .kept(bytes: kept, complete: true)
                exchange.step = .waitingForToken
                return .dispatch
            case .streaming(let waiting, false):
                exchange.body = .streaming(waiting: waiting, complete: true)
                let framing = exchange.upstreamFraming
                switch exchange.step {
                case .sent(var upstream):
                    upstream.requestComplete = true
                    exchange.step = .sent(upstream)
                case .answering(var upstream, let keeps):
                    upstream.requestComplete = true
                    exchange.step = .answering(upstream, keeps: keeps)
                default:
                    return .wait
                }
                return .endUpstreamBody(chunked: framing == .chunked)
            default:
                preconditionFailure("a request ended twice")
            }
        }
    }

    /// Whether the client is read: not while a streamed body has nowhere to go, nor while requests
    /// sent ahead of their turn pile up (`pilingUp`: more than a head's worth of them is waiting).
    func wantsClientReads(pilingUp: Bool, upstreamWritable: () -> Bool) -> Bool {
        guard case .active(let exchange) = state else { return true }
        switch exchange.body {
        case .kept(_, false): return true
        case .kept(_, true), .streaming(_, true): return !pilingUp
        case .streaming(_, false): return exchange.upstream != nil && upstreamWritable()
        }
    }
}

extension ProxyConnectionMachine.Exchange {
    /// The upstream connection the request is on, if any.
    var upstream: ProxyConnectionMachine.Upstream? {
        switch step {
        case .sent(let upstream), .holding(let upstream, _, _), .answering(let upstream, _): upstream
        case .reading, .waitingForToken, .connecting, .challenged, .refreshing: nil
        }
    }

    var replayable: Bool {
        if case .kept = body { return true }
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
