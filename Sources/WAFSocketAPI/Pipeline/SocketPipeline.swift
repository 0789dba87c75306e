import NIOCore
import NIOHTTP1
import WAFDaemonTransport

/// The handlers of one connection of the socket API, in order, for the server and the tests alike:
///
/// 1. `BackPressureHandler`: no read while the connection cannot write (a client that pipelines
///    and never reads cannot make the daemon buffer without bound).
/// 2. `ConnectionGuardHandler`: the peer check (SO_PEERCRED) before anything is answered; idle and
///    request timeouts.
/// 3. `TokenFastPathHandler`: the plain `GET /v1/token` and `GET /v1/auth`, answered from pre-encoded bytes; anything
///    else switches the connection to the codec below for good.
/// 4. `RequestLineTap`, NIOHTTP1's encoder, decoder and pipelining handler; `ProtocolErrorHandler`;
///    `APIHandler`.
enum SocketPipeline {
    static func configure(_ channel: any Channel, api: APIContext, peer: PeerCredentialsSource = .socket) throws {
        let pipeline = channel.pipeline.syncOperations
        let connection = ConnectionState()
        try pipeline.addHandler(BackPressureHandler())
        try pipeline.addHandler(ConnectionGuardHandler(owner: api, connection: connection, peer: peer))
        // Tokens go out only where the role serves them: never on the probes' port (the auth
        // listener's fast path answers only /v1/auth).
        if api.role != .probes { try pipeline.addHandler(TokenFastPathHandler(api: api, connection: connection)) }
        let tap = RequestLineTap()
        try pipeline.addHandler(tap)
        try pipeline.addHandler(HTTPResponseEncoder())
        let decoder = makeDecoder()
        try pipeline.addHandler(decoder)
        try pipeline.addHandler(HTTPServerPipelineHandler())
        try pipeline.addHandler(ProtocolErrorHandler(metrics: api.metrics, tap: tap))
        let restart = DecoderRestart(current: decoder)
        try pipeline.addHandler(APIHandler(api: api, connection: connection, restartDecoder: { restart.run(channel) }))
    }

    static func makeDecoder() -> ByteToMessageHandler<HTTPRequestDecoder> {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = HTTPLimits.maximumHeadBytes
        limits.maxHeaderFieldSize = HTTPLimits.maximumHeadBytes
        // Bytes after a request asking for an upgrade are forwarded, not dropped: the next decoder
        // parses them (we take no upgrade, but answer what follows; see `DecoderRestart`).
        return ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits))
    }
}

/// A request with `Connection: upgrade` makes NIO's decoder stop parsing: what follows belongs to
/// the new protocol. We take no upgrade, so after answering it a fresh decoder takes the place of
/// the old, which forwards its left-over bytes to it: pipelined requests after it are answered.
final class DecoderRestart {
    private var current: ByteToMessageHandler<HTTPRequestDecoder>

    init(current: ByteToMessageHandler<HTTPRequestDecoder>) {
        self.current = current
    }

    func run(_ channel: any Channel) {
        let old = current
        let fresh = SocketPipeline.makeDecoder()
        current = fresh
        let pipeline = channel.pipeline.syncOperations
        do {
            try pipeline.addHandler(fresh, position: .after(old))
            pipeline.removeHandler(old, promise: nil)
        } catch {
            channel.close(promise: nil)
        }
    }
}
