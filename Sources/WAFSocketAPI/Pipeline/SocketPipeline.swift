import NIOCore
import NIOHTTP1
import WAFDaemonTransport

/// The handlers of one connection of the socket API, in order, for the server and the tests alike:
///
/// 1. `ConnectionGuardHandler`: the peer check (SO_PEERCRED) before anything is answered; idle and
///    request timeouts.
/// 2. `TokenFastPathHandler`: the plain `GET /v1/token` and `GET /v1/auth`, answered from pre-encoded bytes; anything
///    else switches the connection to the codec for good. It also keeps the backpressure: no
///    read while the connection cannot write (a client that pipelines and never reads cannot make
///    the daemon buffer without bound). On the probes' listener, which has no fast path,
///    NIO's `BackPressureHandler` does, first in line.
/// 3. The codec (`addCodec`): `RequestLineTap`, NIOHTTP1's encoder, decoder and pipelining handler;
///    `ProtocolErrorHandler`; `APIHandler`. Added when the fast path first switches to it, not
///    before: a connection that only reads tokens never has it, and every read, read completion
///    and read request of such a connection would otherwise pass through six handlers that do
///    nothing for it.
enum SocketPipeline {
    static func configure(_ channel: any Channel, api: APIContext, peer: PeerCredentialsSource = .socket) throws {
        let pipeline = channel.pipeline.syncOperations
        let connection = ConnectionState()
        let guardHandler = ConnectionGuardHandler(owner: api, connection: connection, peer: peer)
        // Tokens go out only where the role serves them: never on the probes' port (the auth
        // listener's fast path answers only /v1/auth).
        if api.role == .probes {
            try pipeline.addHandlers([BackPressureHandler(), guardHandler])
            try addCodec(channel, api: api, connection: connection)
        } else {
            try pipeline.addHandlers([guardHandler, TokenFastPathHandler(api: api, connection: connection)])
        }
    }

    /// The codec and the API behind it, at the end of the pipeline.
    static func addCodec(_ channel: any Channel, api: APIContext, connection: ConnectionState) throws {
        let tap = RequestLineTap()
        let decoder = makeDecoder()
        let restart = DecoderRestart(current: decoder)
        let handlers: [any ChannelHandler] = [
            tap, HTTPResponseEncoder(), decoder, HTTPServerPipelineHandler(), ProtocolErrorHandler(metrics: api.metrics, tap: tap),
            APIHandler(api: api, connection: connection, restartDecoder: { restart.run(channel) }),
        ]
        try channel.pipeline.syncOperations.addHandlers(handlers)
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
