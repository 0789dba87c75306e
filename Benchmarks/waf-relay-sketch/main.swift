// A measuring sketch, not a product: the proxy's relay on the loop of its own that the proxy is
// to move onto (WAFProxyLoop: epoll, non-blocking sockets with writev, TLS client sessions over
// libssl), over the parsers the proxy uses (`HTTPHeadParser`, `HTTPFraming`). It answers one
// question for docs/performance.md: how close to nginx does leaving NIO's pipeline get?
//
// It does what the nginx anchor of `make bench-proxy` does and no more: GET requests without a
// body, a fixed Cookie put in place of the client's, keep-alive upstream connections pooled,
// answers relayed as they come, read by the proxy's own `AnswerReader`. No challenges, no timeouts, no tenants,
// no backpressure beyond the sockets' queues; a request it cannot take closes its connection.
// Given a CA file and a host name, it speaks TLS to the upstream through `LoopStream` (the
// certificate verified for that name, SNI, sessions resumed), the path issue 39's HTTPS rows measure.
//
//   waf-relay-sketch LISTEN_PATH UPSTREAM_PORT TOKEN [CA_FILE HOST]
import Glibc
import NIOCore
import WAFHTTPWire
import WAFProxyLoop

func fail(_ message: String, status: Int32) -> Never {
    let line = Array((message + "\n").utf8)
    _ = write(2, line, line.count)
    exit(status)
}

let arguments = CommandLine.arguments
guard arguments.count == 4 || arguments.count == 6, let port = UInt16(arguments[2]) else {
    fail("usage: waf-relay-sketch LISTEN_PATH UPSTREAM_PORT TOKEN [CA_FILE HOST]", status: 2)
}
do {
    let loop = try EpollLoop()
    let tls = try arguments.count == 6 ? (TLSClientContext(caFile: arguments[4]), arguments[5]) : nil
    let relay = Relay(loop: loop, upstream: try SocketAddress(ipAddress: "127.0.0.1", port: Int(port)), token: arguments[3], tls: tls)
    try relay.listen(on: arguments[1])
    print("ready")
    fflush(nil)
    loop.run()
} catch {
    fail("error: \(error)", status: 1)
}

final class Client: LoopSocketDelegate {
    let socket: LoopSocket
    unowned let relay: Relay
    var buffer = ByteBuffer()
    var upstream: Upstream?

    init(_ socket: LoopSocket, relay: Relay) {
        self.socket = socket
        self.relay = relay
    }

    func connected(_ socket: LoopSocket) {}
    func drained(_ socket: LoopSocket) {}

    func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        var bytes = bytes
        buffer.writeBuffer(&bytes)
        if !relay.forward(self) { drop() }
    }

    func closed(_ socket: LoopSocket, error: Int32?) {
        drop()
    }

    func drop() {
        relay.clients[socket.descriptor] = nil
        socket.close()
        socket.delegate = nil
        upstream?.drop()
        upstream = nil
    }
}

final class Upstream: LoopStreamDelegate {
    let stream: LoopStream
    unowned let relay: Relay
    /// Plaintext from the upstream, not yet read.
    var buffer = ByteBuffer()
    let reader = AnswerReader()
    var client: Client?

    init(_ stream: LoopStream, relay: Relay) {
        self.stream = stream
        self.relay = relay
    }

    func send(_ plaintext: ByteBuffer) {
        stream.write(plaintext)
        stream.flush()
    }

    func drained(_ stream: LoopStream) {}

    func received(_ plaintext: ByteBuffer, on stream: LoopStream) {
        var plaintext = plaintext
        buffer.writeBuffer(&plaintext)
        if !relay.relay(self) { closed(stream, end: .closed) }
    }

    func closed(_ stream: LoopStream, end: LoopStream.End) {
        let client = self.client
        drop()
        client?.drop()
    }

    func drop() {
        stream.close()
        stream.delegate = nil
        client = nil
    }
}

final class Relay {
    let loop: EpollLoop
    let cookie: ByteBuffer
    let pool: LoopStreamPool
    let upstream: SocketAddress
    let tls: UpstreamTLS?
    var listener: LoopListener?
    /// The clients by descriptor, while they are open.
    var clients: [Int32: Client] = [:]

    init(loop: EpollLoop, upstream: SocketAddress, token: String, tls: UpstreamTLS?) {
        self.loop = loop
        cookie = ByteBuffer(string: "Cookie: aws-waf-token=\(token)\r\n\r\n")
        self.upstream = upstream
        self.tls = tls
        pool = LoopStreamPool(idleTimeout: 60_000_000_000, maximumIdle: 1024, on: loop)
    }

    func listen(on path: String) throws {
        listener = try LoopListener.listen(on: try SocketAddress(unixDomainSocketPath: path), on: loop) { [unowned self] socket in
            let client = Client(socket, relay: self)
            socket.delegate = client
            clients[socket.descriptor] = client
        }
    }

    func connectUpstream() -> Upstream? {
        guard let stream = pool.take()?.stream ?? (try? LoopStream(to: upstream, tls: tls, timeout: 5_000_000_000, on: loop)) else { return nil }
        let connection = Upstream(stream, relay: self)
        stream.delegate = connection
        return connection
    }

    /// The next complete request of `client`, if any, sent upstream with the cookie in place.
    func forward(_ client: Client) -> Bool {
        guard client.upstream == nil else { return true }
        let end = try? client.buffer.withUnsafeReadableBytes { try HTTPHeadParser.headEnd($0, limit: 64 * 1024) }
        guard let end else { return client.buffer.readableBytes < 64 * 1024 }
        guard let head = try? HTTPHeadParser.request(client.buffer.readSlice(length: end)!),
            (try? HTTPFraming.request(head)) == HTTPFraming.none,
            let upstream = connectUpstream()
        else { return false }
        var request = ByteBuffer()
        request.reserveCapacity(head.bytes.readableBytes + cookie.readableBytes)
        head.bytes.withUnsafeReadableBytes { raw in
            request.writeBytes(UnsafeRawBufferPointer(rebasing: raw[0..<(head.third.upperBound + 2)]))
            for field in head.fields where !head.equals(field.name, lowercase: "cookie") && !head.equals(field.name, lowercase: "connection") {
                request.writeBytes(UnsafeRawBufferPointer(rebasing: raw[field.line]))
                request.writeStaticString("\r\n")
            }
        }
        request.writeImmutableBuffer(cookie)
        upstream.client = client
        upstream.reader.expectAnswer(toHead: head.isHead, decodeChunks: head.minorVersion == 0)
        client.upstream = upstream
        upstream.send(request)
        return true
    }

    /// Relays what the upstream sent, as it came; when its answer ended, the next request of the
    /// client goes.
    func relay(_ upstream: Upstream) -> Bool {
        let bytes = upstream.buffer
        upstream.buffer.clear()
        guard let client = upstream.client else { return bytes.readableBytes == 0 }
        var ended = false
        do {
            try upstream.reader.read(bytes) { part in
                switch part {
                case .head(let head, _): client.socket.write(head.bytes)
                case .body(let body): client.socket.write(body)
                case .end: ended = true
                }
                return !ended
            }
        } catch {
            return false
        }
        client.socket.flush()
        guard ended else { return true }
        upstream.client = nil
        client.upstream = nil
        // nginx closes a kept-alive connection after keepalive_requests answers, saying so.
        if upstream.reader.reusable {
            pool.release(upstream.stream)
        } else {
            upstream.drop()
        }
        return forward(client)
    }
}
