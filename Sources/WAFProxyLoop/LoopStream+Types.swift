import NIOCore

extension LoopStream {
    /// Connects to `address`; with `tls`, verifies the server as `serverName` (and resumes the
    /// context's last session for it). `timeout` bounds the connect and the handshake.
    public convenience init(
        to address: SocketAddress, tls: UpstreamTLS?, timeout: UInt64, on loop: EpollLoop
    ) throws(LoopError) {
        try self.init(to: [address], tls: tls, timeout: timeout, on: loop)
    }

    /// Through a forward proxy at `addresses` (`CONNECT` to `tunnel.authority`), then TLS with
    /// the upstream when `tls` says so: its checks are the upstream's, end to end. `timeout` bounds
    /// the connect, the proxy's answer and the handshake together.
    public convenience init(
        through addresses: [SocketAddress], tunnel: Tunnel, tls: UpstreamTLS?, timeout: UInt64, on loop: EpollLoop
    ) throws(LoopError) {
        try self.init(to: addresses, tls: tls, tunnel: tunnel, timeout: timeout, on: loop)
    }

    /// Where the stream is; each state carries what it needs, and nothing else says it.
    enum State {
        /// TCP is being connected (with TLS, its first flight queued); `untried` addresses follow
        /// should it be refused, with `written`, the plaintext written so far.
        case connecting(tls: TLSClientSession?, untried: [SocketAddress], written: [ByteBuffer], timer: EpollLoop.Timer)
        /// TCP to the forward proxy is up and `CONNECT` sent; its answer's head so far (`head`).
        case tunnelling(head: ByteBuffer, timer: EpollLoop.Timer)
        /// TCP is up; the TLS handshake runs, within the same timeout.
        case handshaking(TLSClientSession, timer: EpollLoop.Timer)
        /// Carrying bytes, plain or through TLS.
        case up(TLSClientSession?)
        case ended(End)
    }

    /// How a stream ended.
    public enum End: Equatable, Sendable {
        /// The peer closed its side: the clean end an answer framed by the close has.
        case closed
        /// No connection was made: the last address tried refused it (why, in words).
        case unreachable(String)
        /// The connection, or its handshake, was not up within its timeout.
        case timedOut
        /// The connection failed once made: a reset, an error, its TLS (why, in words). What the
        /// peer was sending was cut short.
        case failed(String)
        /// The forward proxy answered `CONNECT` with this status, not 2xx: no tunnel.
        case refused(Int)
    }

    /// A tunnel through a forward proxy (`CONNECT`), to `authority` (the upstream's `host:port`),
    /// with `authorization` as `Proxy-Authorization` when the proxy asks for credentials.
    public struct Tunnel: Sendable, Equatable {
        public let authority: String
        public let authorization: String?

        public init(authority: String, authorization: String?) {
            self.authority = authority
            self.authorization = authorization
        }

        /// The request that asks for the tunnel.
        var request: ByteBuffer {
            var request = ByteBuffer()
            request.writeString("CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n")
            if let authorization { request.writeString("Proxy-Authorization: \(authorization)\r\n") }
            request.writeStaticString("\r\n")
            return request
        }

        /// What the proxy's answer so far says.
        enum Answer: Equatable {
            /// Its head has not ended yet.
            case incomplete
            /// A head longer than any proxy sends: not an answer to wait for.
            case endless
            /// The head ended after `length` bytes with `status` (0: no status line at all).
            case status(Int, length: Int)
        }

        /// Reads the proxy's answer to `CONNECT` so far: only its status matters, and where its
        /// head ends (what follows is the tunnel's).
        static func answer(_ head: ByteBuffer) -> Answer {
            let end = head.withUnsafeReadableBytes { raw in raw.firstRange(of: [13, 10, 13, 10]).map { $0.upperBound } }
            guard let end else { return head.readableBytes > 16 * 1024 ? .endless : .incomplete }
            // "HTTP/1.1 200 Connection established", the reason phrase optional.
            let line = head.withUnsafeReadableBytes { raw in String(decoding: raw.prefix { $0 != 13 && $0 != 10 }.prefix(256), as: UTF8.self) }
            let words = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard words.count >= 2, words[0].hasPrefix("HTTP/1."), words[1].count == 3, let status = Int(words[1]) else {
                return .status(0, length: end)
            }
            return .status(status, length: end)
        }
    }
}
