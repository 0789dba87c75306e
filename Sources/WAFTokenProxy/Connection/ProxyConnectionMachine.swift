import WAFHTTPWire

/// One proxy connection's state as a value: each thing the connection meets (a request's head or
/// body, the upstream's answer, a challenge, a failure, a close) is an event that changes it and
/// returns what `ProxyHandler`, its driver, must do. It holds no bytes, channels or timers and does
/// no I/O, so every path through it is tested directly (`ProxyConnectionMachineTests`); the driver
/// keeps the bytes and performs. The model is SwiftNIO's state machines.
struct ProxyConnectionMachine {
    /// Where the request in progress is.
    enum Phase: Equatable {
        /// Its body is still arriving (kept, or streamed once the upstream is there).
        case receiving
        /// Waiting for a first token (`proxy.tokenWaitSec`).
        case waitingForToken
        case connecting
        /// Sent (or sending); no answer yet.
        case awaitingAnswer
        /// A challenge arrived; the driver keeps its answer until the replay is decided.
        case holdingChallenge
        /// Waiting for the new token a challenge asked for.
        case refreshing
        /// The answer is going to the client.
        case answering
    }

    /// The request in progress. Plain values only: a copy costs no reference counting.
    struct Exchange {
        var phase = Phase.receiving
        /// How the client frames the request's body.
        let framing: HTTPFraming
        let keepAlive: Bool
        /// The most of a body kept for a replay (`proxy.replayBufferBytes`).
        let replayLimit: Int
        /// The body goes as it arrives, past the replay buffer: then it is never replayed.
        var streaming: Bool
        /// The client's request is complete (its body read to the end).
        var requestComplete: Bool
        /// Body bytes the driver keeps: for a replay, or until the upstream is there.
        var kept = 0
        /// Bytes of a challenge's answer the driver keeps.
        var held = 0
        /// An upstream connection is attached; its head was sent with it, so this implies
        /// `upstreamHeadSent`.
        var hasUpstream = false
        var upstreamReused = false
        /// The upstream got the request's head (on the current connection, or on one that failed).
        var upstreamHeadSent = false
        /// The upstream got the whole request: only then can its connection be reused.
        var upstreamRequestComplete = false
        var replayed = false
        /// A pooled connection that the upstream had closed is tried once more on a new one.
        var retriedClosedConnection = false
        /// How the answer's body goes to the client (set with the answer's head).
        var clientFraming = ProxyRules.ClientFraming.asUpstream

        var replayable: Bool { !streaming }
    }

    /// A challenge's answer is kept up to this size to be passed on unchanged if no replay
    /// happens; a larger one is passed on at once.
    static let maximumHeldChallenge = 1 << 20

    private(set) var exchange: Exchange?
    /// Nothing more is read from the client (an error was answered, or the connection is closing).
    private(set) var closing = false
    /// Set by an error answered before the request's body was read: the connection cannot go on.
    private(set) var closeAfterAnswer = false
    /// The guard was told the request is being served: its request timeout, which bounds the head
    /// and the whole body (TENANT-6), has stopped.
    private(set) var serving = false
    /// Whether the connection carries another request after the answer in progress.
    private(set) var keepsAfterAnswer = false

    var phase: Phase? { exchange?.phase }

    /// Applies `change` to the request in progress, if there is one. (Not private only so that
    /// the upstream side's events, in their own file, use it too.)
    @inline(__always)
    mutating func update<Result>(_ change: (inout Exchange) -> Result) -> Result? {
        guard var current = exchange else { return nil }
        defer { exchange = current }
        return change(&current)
    }

    // MARK: The client's side

    enum Begin: Equatable {
        /// Read the body first (answering `100 Continue` when asked).
        case readBody(sendContinue: Bool)
        /// Send now, and stream the body as it arrives.
        case dispatchAndStream(sendContinue: Bool)
        /// No body: the request is complete; it is being served, and goes now.
        case serve
    }

    /// A request head that passed every check.
    mutating func requestBegan(
        framing: HTTPFraming, streams: Bool, keepAlive: Bool, upgrade: Bool, expectsContinue: Bool, replayLimit: Int
    )
        -> Begin
    {
        exchange = Exchange(framing: framing, keepAlive: keepAlive, replayLimit: replayLimit, streaming: streams, requestComplete: framing == .none)
        // A request the upstream would see as asking for an upgrade it cannot get: answered, then closed.
        if upgrade { closeAfterAnswer = true }
        if framing == .none { return .serve }
        return streams ? .dispatchAndStream(sendContinue: expectsContinue) : .readBody(sendContinue: expectsContinue)
    }

    /// A request the proxy refuses to read on: its error is answered, then the connection closes.
    mutating func refuse() {
        closeAfterAnswer = true
        closing = true
    }

    /// The request is complete or its answer begins: true when the guard must now hear that the
    /// request is being served, which stops its request timeout (a 408 must never be written over
    /// an answer). Until then that timeout bounds the head and the body together (TENANT-6).
    mutating func servingBegins() -> Bool {
        guard !serving else { return false }
        serving = true
        return true
    }

    /// The request goes looking for a token, then an upstream connection.
    mutating func dispatching() {
        update { $0.phase = .waitingForToken }
    }

    mutating func connecting() {
        update { $0.phase = .connecting }
    }

    enum BodyPiece: Equatable {
        /// Straight to the upstream, framed as `upstreamFraming` says.
        case forward
        /// Kept by the driver.
        case keep
        /// Kept, and the body outgrew the replay buffer: it streams from now on, so send now.
        case keepAndDispatch
    }

    /// `mayKeep`: whether the memory budget lets the driver keep these bytes for a replay; past
    /// it the body streams, as one past the replay buffer does (TENANT-12).
    mutating func bodyArrived(_ count: Int, mayKeep: Bool = true) -> BodyPiece {
        update { exchange in
            if exchange.streaming, exchange.hasUpstream { return .forward }
            exchange.kept += count
            guard !exchange.streaming, exchange.kept > exchange.replayLimit || !mayKeep else { return .keep }
            exchange.streaming = true
            return .keepAndDispatch
        } ?? .keep
    }

    /// Whether answer bytes that arrive now would be held back with a challenge (the budget is asked first).
    var holdsChallenge: Bool { exchange?.phase == .holdingChallenge }

    /// Whether body bytes that arrive now would be kept for a replay (the budget is asked first).
    var keepsBodyForReplay: Bool { exchange.map { !$0.streaming } ?? false }

    enum RequestEnd: Equatable {
        /// The kept request goes now.
        case dispatch
        /// The streamed body is all upstream: end it (a chunked one with its last chunk).
        case endUpstreamBody(chunked: Bool)
        /// The upstream is not there yet: the body ends when it is.
        case wait
    }

    /// The client's request was read to its end.
    mutating func requestEnded() -> RequestEnd {
        update { exchange in
            exchange.requestComplete = true
            if !exchange.streaming { return .dispatch }
            guard exchange.hasUpstream else { return .wait }
            exchange.upstreamRequestComplete = true
            return .endUpstreamBody(chunked: exchange.upstreamFraming == .chunked)
        } ?? .wait
    }

    /// A malformed body after part of the request went upstream cannot be answered, only closed.
    var requestReachedUpstream: Bool { exchange?.upstreamHeadSent ?? false }

    /// Whether the client is read: not while a streamed body has nowhere to go, nor while requests
    /// sent ahead of their turn pile up (`pilingUp`: more than a head's worth of them is waiting).
    func wantsClientReads(pilingUp: Bool, upstreamWritable: () -> Bool) -> Bool {
        guard let exchange else { return true }
        if exchange.requestComplete { return !pilingUp }
        guard exchange.streaming else { return true }
        guard exchange.hasUpstream else { return false }
        return upstreamWritable()
    }

    // MARK: The answer's end

    /// The client's answer has begun: an error can no longer be answered, only the connection closed.
    var answering: Bool { exchange?.phase == .answering }

    /// An answer's head goes to the client (the upstream's, or an error of the proxy's own). Returns
    /// whether the connection carries another request after it: not when either side asked to
    /// close, nor when `mayKeep` says no (the daemon stops, or a reload took the peer's access
    /// away, TENANT-3). Decided once, as the head is written, so that the head says what follows.
    mutating func answerHeadGoes(mayKeep: () -> Bool) -> Bool {
        if let exchange, exchange.keepAlive, !closeAfterAnswer, exchange.clientFraming == .asUpstream {
            keepsAfterAnswer = mayKeep()
        } else {
            keepsAfterAnswer = false
        }
        return keepsAfterAnswer
    }

    /// The answer is complete. True: the connection takes the next request; false: it closes.
    mutating func answerFinished() -> Bool {
        let keep = keepsAfterAnswer
        keepsAfterAnswer = false
        serving = false
        exchange = nil
        if !keep { closing = true }
        return keep
    }

    /// The connection cannot go on (part of an answer went out, or the request's body broke after
    /// part of it went upstream), or the client left. True when it had an upstream to close.
    mutating func closed() -> Bool {
        let hadUpstream = exchange?.hasUpstream ?? false
        exchange = nil
        closing = true
        return hadUpstream
    }
}
