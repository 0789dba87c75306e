import NIOCore
import NIOHTTP1
import WAFTokenCore

#if canImport(Glibc)
import Glibc
import WAFDaemonTransport
import WAFProviderRegistry
#endif

/// Answers the hot requests, a plain `GET /v1/token` (`PlainTokenRequest`) and a plain `GET
/// /v1/auth` (`PlainAuthRequest`, the one forward authentication makes for every request it lets
/// through), with or without a provider selector, from pre-encoded bytes without the HTTP codec
/// (an auth answer is kept for the same cookies and URI); pipelined ones are answered
/// in one write. Which provider a selector means, and whether the peer may use it, is decided
/// once per connection and selector, again when anything was published or reloaded; a request
/// the API would refuse (unknown provider, 403) goes to the codec, which answers it. The first request it does not
/// answer switches the connection to the NIOHTTP1 pipeline, added behind it then, for good, so framing and
/// pipelining stay the codec's business. It answers only while the connection can write: a client
/// that pipelines without reading gets no more than the socket buffers hold.
final class TokenFastPathHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let api: APIContext
    private let connection: ConnectionState
    /// The connection went over to the codec for good.
    private(set) var codec = false
    private var pending: ByteBuffer?
    /// Each provider's answers, by name.
    private var caches: [String: TokenResponseCache] = [:]
    /// The provider answered last, and its cache.
    private var lastCache: (entry: ProviderEntry, cache: TokenResponseCache)?
    /// The last selector seen (its bytes), the provider it means, and the generation that held.
    private var resolved: (selector: [UInt8], provider: ProviderEntry, generation: UInt64)?
    /// Answers since the last flush to the metrics: with a token (200), without (503), auth (200).
    private var servedSinceFlush = (withToken: 0, without: 0, auth: 0)
    /// The last auth answer, with what it was made of.
    private var lastAuth: (key: [UInt8], second: Int, generation: UInt64, answer: ByteBuffer)?
    private var stopping = false
    /// Whether the connection could write when last told, and a read asked for meanwhile.
    private var writable = true
    private var heldRead = false

    init(api: APIContext, connection: ConnectionState) {
        self.api = api
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !codec else { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if pending == nil { pending = bytes } else { pending!.writeBuffer(&bytes) }
        answer(context)
    }

    // Backpressure, for the fast path and the codec behind it alike (NIO's `BackPressureHandler`,
    // in one handler fewer for every event): no read while the connection cannot write, so a
    // client that pipelines and never reads cannot make the daemon buffer without bound.
    func read(context: ChannelHandlerContext) {
        if writable { context.read() } else { heldRead = true }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable = context.channel.isWritable
        if writable {
            if !codec, pending != nil { answer(context) }
            if heldRead {
                heldRead = false
                context.read()
            }
        } else {
            context.flush()
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        flushCounts()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ServerShutdownEvent { stopping = true }
        context.fireUserInboundEventTriggered(event)
    }

    /// Answers every complete plain request pending while the connection can write.
    private func answer(_ context: ChannelHandlerContext) {
        guard api.allows(connection) else { return switchToCodec(context) }
        var answered = false
        while var buffer = pending, buffer.readableBytes > 0, context.channel.isWritable {
            let head = buffer.withUnsafeReadableBytes { Self.look($0, tokens: api.role == .socket) }
            // Stopping, the codec answers with `Connection: close` (also on a connection accepted as
            // the stop began, which its event may reach later).
            let stopped = stopping || api.shuttingDown.load(ordering: .relaxed)
            if case .auth(let length, let request) = head, !stopped {
                guard let answer = authAnswer(request, buffer, context) else { return switchToCodec(context) }
                buffer.moveReaderIndex(forwardBy: length)
                pending = buffer.readableBytes > 0 ? buffer : nil
                context.write(wrapOutboundOut(answer), promise: nil)
                servedSinceFlush.auth += 1
                answered = true
                continue
            }
            guard case .plain(let length, let request, let selector) = head else {
                // An incomplete head waits for its rest, unless it grew past the limit: the codec refuses that (431).
                if case .incomplete = head, buffer.readableBytes <= HTTPLimits.maximumHeadBytes { break }
                return switchToCodec(context)
            }
            guard !stopped, let entry = provider(for: selector) else { return switchToCodec(context) }
            let cache = cache(for: entry)
            if cache.refresh(
                entry: entry, peer: connection.peer, second: Int(time(nil)), generation: api.generation.current,
                allocator: context.channel.allocator)
            {
                flushCounts()
            }
            guard cache.answersFromCache else { return switchToCodec(context) }
            buffer.moveReaderIndex(forwardBy: length)
            pending = buffer.readableBytes > 0 ? buffer : nil
            context.write(wrapOutboundOut(request.plainText ? cache.plainText : cache.json), promise: nil)
            if cache.status == 200 { servedSinceFlush.withToken += 1 } else { servedSinceFlush.without += 1 }
            answered = true
        }
        if answered {
            context.flush()
            context.triggerUserOutboundEvent(ConnectionEvent.responseFinished(partialRequestPending: pending != nil), promise: nil)
        }
    }

    /// What the pending bytes start with, as far as the fast path is concerned.
    private enum PendingHead {
        /// No complete head yet: wait for more bytes.
        case incomplete
        /// A head the fast path leaves to the codec: not a plain token request, or one with a line
        /// ending in a bare LF (which never completes a head here; the codec refuses it, 400).
        case forCodec
        /// A plain token request whose head is `length` bytes, with its selector's bytes (empty: none).
        case plain(length: Int, request: PlainTokenRequest.Decision, selector: [UInt8])
        /// A plain auth request whose head is `length` bytes; its ranges are into the pending bytes.
        case auth(length: Int, request: PlainAuthRequest.Decision)
    }

    /// `tokens`: whether this listener serves token reads (the auth listener serves only auth).
    private static func look(_ bytes: UnsafeRawBufferPointer, tokens: Bool) -> PendingHead {
        guard let length = PlainTokenRequest.headLength(in: bytes, limit: HTTPLimits.maximumHeadBytes) else {
            return PlainTokenRequest.hasBareLineFeed(bytes) ? .forCodec : .incomplete
        }
        let head = UnsafeRawBufferPointer(rebasing: bytes[0..<length])
        if tokens, let request = PlainTokenRequest.decide(head) {
            return .plain(length: length, request: request, selector: request.selector.map { Array(bytes[$0]) } ?? [])
        }
        return PlainAuthRequest.decide(head).map { .auth(length: length, request: $0) } ?? .forCodec
    }

    /// The answer to a plain auth request at the start of `buffer`, nil when the codec must give
    /// it (no token yet: it waits; a provider the peer may not use: 403).
    private func authAnswer(_ request: PlainAuthRequest.Decision, _ buffer: ByteBuffer, _ context: ChannelHandlerContext) -> ByteBuffer? {
        let bytes = { (range: Range<Int>?) -> [UInt8] in
            range.flatMap { buffer.getBytes(at: buffer.readerIndex + $0.lowerBound, length: $0.count) } ?? []
        }
        var selector = bytes(request.selector)
        if request.selector == nil, let host = request.forwardedHost, api.endpointOptions.selectByForwardedHost,
            let name = ForwardedRequest.hostWithoutPort(String(decoding: bytes(host), as: UTF8.self)),
            api.providers.covering(domain: name, visibleTo: .some(connection.peer)) != nil
        {
            selector = Array("domain=\(name)".utf8)
        }
        guard let entry = provider(for: selector) else { return nil }
        // What the answer is made of: the provider, the cookies and the URI.
        var key = Array(entry.name.utf8) + [0] + bytes(request.uri) + [0]
        for cookie in request.cookies { key += bytes(cookie) + [0] }
        let (second, generation) = (Int(time(nil)), api.generation.current)
        if let lastAuth, lastAuth.second == second, lastAuth.generation == generation, lastAuth.key == key { return lastAuth.answer }
        // The token and the lists read together (TENANT-2): never a new identity's token to a
        // peer the lists of the old one let in.
        guard let cached = entry.token(for: connection.peer) else { return nil }
        let uri = request.uri.map { String(decoding: bytes($0), as: UTF8.self) } ?? "/"
        let reply = APIHandler.authReply(
            cached.token, entry: entry, uri: uri, cookies: request.cookies.map { String(decoding: bytes($0), as: UTF8.self) })
        let answer = reply.encoded(keepAlive: true, date: HTTPReply.date(seconds: second), allocator: context.channel.allocator)
        lastAuth = (key, second, generation, answer)
        return answer
    }

    /// The entry's answers, by name (a reload makes new entries under the same names).
    private func cache(for entry: ProviderEntry) -> TokenResponseCache {
        if let lastCache, lastCache.entry === entry { return lastCache.cache }
        let cache = caches[entry.name] ?? TokenResponseCache()
        caches[entry.name] = cache
        lastCache = (entry, cache)
        return cache
    }

    /// The provider `selector` (a query's bytes, empty for none) means and the peer may use; nil
    /// when the API would refuse the request.
    private func provider(for selector: [UInt8]) -> ProviderEntry? {
        let generation = api.generation.current
        if let resolved, resolved.generation == generation, resolved.selector == selector { return resolved.provider }
        var query: [String: String] = [:]
        if let equals = selector.firstIndex(of: UInt8(ascii: "=")) {
            query[String(decoding: selector[..<equals], as: UTF8.self)] = String(decoding: selector[(equals + 1)...], as: UTF8.self)
        }
        guard case .provider(let entry) = api.providers.select(query, peer: connection.peer) else { return nil }
        resolved = (selector, entry, generation)
        return entry
    }

    /// The hand-off, once and for good: the codec's handlers are added behind this one, and the
    /// bytes not answered yet (`pending`: the first request the fast path does not take, whole or
    /// in part, and all after it) go to them as if just read. The answers the fast path wrote are
    /// already ahead of them on the wire, so the order of answers is the order of requests. From
    /// here this handler passes reads on and only keeps the backpressure.
    private func switchToCodec(_ context: ChannelHandlerContext) {
        codec = true
        do {
            try SocketPipeline.addCodec(context.channel, api: api, connection: connection)
        } catch {
            pending = nil
            return context.close(promise: nil)
        }
        if let held = pending {
            pending = nil
            context.fireChannelRead(wrapInboundOut(held))
        }
    }

    private func flushCounts() {
        let counts = [
            ("/v1/token", UInt(200), servedSinceFlush.withToken), ("/v1/token", 503, servedSinceFlush.without),
            ("/v1/auth", 200, servedSinceFlush.auth),
        ]
        for (endpoint, status, count) in counts where count > 0 {
            api.metrics.countRequests(endpoint: endpoint, status: status, by: count)
            api.requestsServed.add(count, ordering: .relaxed)
        }
        servedSinceFlush = (0, 0, 0)
    }
}
