// A measuring sketch, not a product: the proxy's relay on an epoll loop of its own, without NIO's
// channel pipeline, over the parsers the proxy uses (`HTTPHeadParser`, `HTTPFraming`). It answers
// one question for docs/performance.md: how close to nginx does leaving the pipeline get?
//
// It does what the nginx anchor of `make bench-proxy` does and no more: GET requests without a
// body, a fixed Cookie put in place of the client's, keep-alive upstream connections pooled,
// answers framed by Content-Length relayed as they come. No challenges, no timeouts, no tenants,
// no backpressure beyond the socket buffers; a request it cannot take closes its connection.
// Given a CA file and a host name, it speaks TLS to the upstream through OpenSSL's libssl (the
// certificate verified for that name, SNI, the first session resumed by later connections): how
// close TLS on a loop of its own gets is the question issue 39's HTTPS rows ask.
//
//   waf-relay-sketch LISTEN_PATH UPSTREAM_PORT TOKEN [CA_FILE HOST]
import CEpoll
import CSketchTLS
import Glibc
import NIOCore
import WAFHTTPWire

final class Upstream {
    let descriptor: Int32
    /// The TLS session over it (OpenSSL's `SSL *`), for an HTTPS upstream.
    var tls: OpaquePointer?
    var buffer = ByteBuffer()
    /// Body bytes still to come; nil while the head is awaited.
    var left: Int?
    /// The answer under way lets the connection carry another request.
    var reusable = true
    var client: Client?

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }
}

final class Client {
    let descriptor: Int32
    var buffer = ByteBuffer()
    var upstream: Upstream?

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }
}

enum Entry {
    case listener
    case client(Client)
    case upstream(Upstream)
}

func fail(_ message: String, status: Int32) -> Never {
    let line = Array((message + "\n").utf8)
    _ = write(2, line, line.count)
    exit(status)
}

let arguments = CommandLine.arguments
guard arguments.count == 4 || arguments.count == 6, let port = UInt16(arguments[2]) else {
    fail("usage: waf-relay-sketch LISTEN_PATH UPSTREAM_PORT TOKEN [CA_FILE HOST]", status: 2)
}
let tls = arguments.count == 6 ? UpstreamTLS(caFile: arguments[4], host: arguments[5]) : nil
Relay(port: port, token: arguments[3], tls: tls).run(listeningOn: arguments[1])

/// TLS to the upstream: one client context, verification against the CA for the host name.
final class UpstreamTLS {
    let context: OpaquePointer
    let host: String
    /// The first connection's session, offered by every later one.
    var session: OpaquePointer?

    init(caFile: String, host: String) {
        guard let context = SSL_CTX_new(TLS_client_method()), SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
            fail("error: cannot load the CA file \(caFile)", status: 1)
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        self.context = context
        self.host = host
    }

    /// The handshake on a connected socket that still blocks.
    func start(on descriptor: Int32) -> OpaquePointer? {
        guard let tls = SSL_new(context) else { return nil }
        SSL_set_fd(tls, descriptor)
        _ = sketch_set_server_name(tls, host)
        SSL_set1_host(tls, host)
        if let session { SSL_set_session(tls, session) }
        guard SSL_connect(tls) == 1 else {
            SSL_free(tls)
            return nil
        }
        if session == nil { session = SSL_get1_session(tls) }
        return tls
    }
}

final class Relay {
    let port: UInt16
    let tls: UpstreamTLS?
    let cookie: [UInt8]
    let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    var entries = [Int32: Entry]()
    var idle: [Upstream] = []
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    init(port: UInt16, token: String, tls: UpstreamTLS?) {
        self.port = port
        self.tls = tls
        cookie = Array("Cookie: aws-waf-token=\(token)\r\n".utf8)
    }

    func watch(_ descriptor: Int32, _ entry: Entry) {
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: descriptor))
        epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
        entries[descriptor] = entry
    }

    func forget(_ descriptor: Int32) {
        if case .upstream(let upstream)? = entries[descriptor], let session = upstream.tls { SSL_free(session) }
        entries[descriptor] = nil
        close(descriptor)
    }

    /// Writes all of `bytes`, through `session` when there is one (a sketch: a full socket
    /// buffer waits here).
    func send(_ descriptor: Int32, _ bytes: ByteBuffer, tls session: OpaquePointer? = nil) -> Bool {
        bytes.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                var waitFor = Int16(POLLOUT)
                if let session {
                    let written = SSL_write(session, raw.baseAddress! + offset, Int32(raw.count - offset))
                    if written > 0 {
                        offset += Int(written)
                        continue
                    }
                    switch SSL_get_error(session, written) {
                    case SSL_ERROR_WANT_WRITE: break
                    case SSL_ERROR_WANT_READ: waitFor = Int16(POLLIN)
                    default: return false
                    }
                } else {
                    let written = write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                    if written > 0 {
                        offset += written
                        continue
                    }
                    guard written < 0, errno == EAGAIN else { return false }
                }
                var pending = pollfd(fd: descriptor, events: waitFor, revents: 0)
                _ = poll(&pending, 1, -1)
            }
            return true
        }
    }

    /// Reads what is there into `buffer`; false at the end or on an error. Through TLS, every
    /// record there is read: epoll does not know of plaintext OpenSSL holds.
    func receive(_ descriptor: Int32, into buffer: inout ByteBuffer, tls session: OpaquePointer? = nil) -> Bool {
        guard let session else {
            let count = scratch.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EAGAIN { return true }
            guard count > 0 else { return false }
            _ = scratch.withUnsafeBytes { buffer.writeBytes(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            return true
        }
        while true {
            let count = scratch.withUnsafeMutableBytes { SSL_read(session, $0.baseAddress!, Int32($0.count)) }
            guard count > 0 else { return SSL_get_error(session, count) == SSL_ERROR_WANT_READ }
            _ = scratch.withUnsafeBytes { buffer.writeBytes(UnsafeRawBufferPointer(rebasing: $0[0..<Int(count)])) }
        }
    }

    func connectUpstream() -> Upstream? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let address = try? SocketAddress(ipAddress: "127.0.0.1", port: Int(port))
        guard address?.withSockAddr({ connect(descriptor, $0, socklen_t($1)) }) == 0 else {
            close(descriptor)
            return nil
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let session = tls?.start(on: descriptor)
        if tls != nil, session == nil {
            close(descriptor)
            return nil
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        let upstream = Upstream(descriptor: descriptor)
        upstream.tls = session
        watch(descriptor, .upstream(upstream))
        return upstream
    }

    /// The next complete request of `client`, if any, sent upstream with the cookie in place.
    func forward(_ client: Client) -> Bool {
        guard client.upstream == nil else { return true }
        let end = try? client.buffer.withUnsafeReadableBytes { try HTTPHeadParser.headEnd($0, limit: 64 * 1024) }
        guard let end else { return client.buffer.readableBytes < 64 * 1024 }
        guard let head = try? HTTPHeadParser.request(client.buffer.readSlice(length: end)!),
            (try? HTTPFraming.request(head)) == HTTPFraming.none,
            let upstream = idle.popLast() ?? connectUpstream()
        else { return false }
        var request = ByteBuffer()
        request.reserveCapacity(head.bytes.readableBytes + cookie.count)
        head.bytes.withUnsafeReadableBytes { raw in
            request.writeBytes(UnsafeRawBufferPointer(rebasing: raw[0..<(head.third.upperBound + 2)]))
            for field in head.fields where !head.equals(field.name, lowercase: "cookie") && !head.equals(field.name, lowercase: "connection") {
                request.writeBytes(UnsafeRawBufferPointer(rebasing: raw[field.line]))
                request.writeStaticString("\r\n")
            }
        }
        request.writeBytes(cookie)
        request.writeStaticString("\r\n")
        upstream.client = client
        upstream.left = nil
        client.upstream = upstream
        return send(upstream.descriptor, request, tls: upstream.tls)
    }

    /// Relays what the upstream sent; when its answer ended, the next request of the client goes.
    func relay(_ upstream: Upstream) -> Bool {
        guard let client = upstream.client else { return false }
        if upstream.left == nil {
            let end = try? upstream.buffer.withUnsafeReadableBytes { try HTTPHeadParser.headEnd($0, limit: 64 * 1024) }
            guard let end else { return true }
            guard let head = try? HTTPHeadParser.response(upstream.buffer.getSlice(at: upstream.buffer.readerIndex, length: end)!),
                case .length(let length)? = try? HTTPFraming.response(head, toHead: false)
            else { return false }
            upstream.left = length + end
            upstream.reusable = head.keepAlive
        }
        let chunk = upstream.buffer.readSlice(length: min(upstream.left!, upstream.buffer.readableBytes))!
        upstream.left! -= chunk.readableBytes
        guard send(client.descriptor, chunk) else { return false }
        if upstream.left == 0 {
            guard upstream.buffer.readableBytes == 0 else { return false }
            upstream.client = nil
            client.upstream = nil
            // nginx closes a kept-alive connection after keepalive_requests answers, saying so.
            if upstream.reusable { idle.append(upstream) } else { forget(upstream.descriptor) }
            upstream.buffer.clear()
            return forward(client)
        }
        return true
    }

    func run(listeningOn path: String) {
        unlink(path)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let address = try? SocketAddress(unixDomainSocketPath: path)
        guard address?.withSockAddr({ bind(listener, $0, socklen_t($1)) }) == 0, listen(listener, 4096) == 0 else {
            fail("error: cannot listen on \(path): errno \(errno)", status: 1)
        }
        watch(listener, .listener)
        print("ready")
        fflush(nil)

        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), -1)
            for index in 0..<max(0, Int(count)) {
                let descriptor = events[index].data.fd
                switch entries[descriptor] {
                case .listener?:
                    let accepted = accept(listener, nil, nil)
                    if accepted >= 0 {
                        _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
                        watch(accepted, .client(Client(descriptor: accepted)))
                    }
                case .client(let client)?:
                    guard receive(descriptor, into: &client.buffer), forward(client) else {
                        if let upstream = client.upstream { forget(upstream.descriptor) }
                        forget(descriptor)
                        continue
                    }
                case .upstream(let upstream)?:
                    guard receive(descriptor, into: &upstream.buffer, tls: upstream.tls), relay(upstream) else {
                        if let client = upstream.client { forget(client.descriptor) }
                        idle.removeAll { $0 === upstream }
                        forget(descriptor)
                        continue
                    }
                case nil:
                    continue
                }
            }
        }
    }
}
