import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// An upstream for the proxy's tests that answers each request with the raw bytes a script gives
/// for its path (any framing, interim answers, a close after it), and keeps every request it got
/// as it arrived: what the proxy sends upstream is checked on the wire.
public final class ScriptedUpstream: Sendable {
    /// The bytes to answer with, and whether the connection closes after them.
    public struct Reply: Sendable {
        public let bytes: String
        public let close: Bool
        public init(_ bytes: String, close: Bool = false) {
            self.bytes = bytes
            self.close = close
        }
    }

    /// One request as it arrived: its head's text, and its body (Content-Length framed, or the
    /// chunked bytes as they came).
    public struct Request: Sendable {
        public let head: String
        public let body: String
        /// The peer's address: the proxy's, or its egress's (EGRESS-1).
        public var from: String? = nil
        public var path: String { String(head.split(separator: " ", maxSplits: 2).dropFirst().first ?? "") }
        /// The values of the header `name` (any case).
        public func header(_ name: String) -> [String] {
            head.split(separator: "\r\n").dropFirst().compactMap { line in
                guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name.lowercased() else { return nil }
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
    }

    private let channel: any Channel
    private let received = NIOLockedValueBox<[Request]>([])

    /// `http://127.0.0.1:PORT`, for `proxy.upstream`.
    public let origin: String

    public init(_ script: @escaping @Sendable (_ path: String) -> Reply) async throws {
        let received = self.received
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Responder(script: script, received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        origin = "http://127.0.0.1:\(channel.localAddress!.port!)"
    }

    /// Every request so far.
    public var requests: [Request] { received.withLockedValue { $0 } }

    public func stop() async {
        try? await channel.close()
    }

    private final class Responder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let script: @Sendable (String) -> Reply
        let received: NIOLockedValueBox<[Request]>
        var buffer = ""

        init(script: @escaping @Sendable (String) -> Reply, received: NIOLockedValueBox<[Request]>) {
            self.script = script
            self.received = received
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            buffer += String(decoding: unwrapInboundIn(data).readableBytesView, as: UTF8.self)
            while var request = take() {
                request.from = context.channel.remoteAddress?.ipAddress
                received.withLockedValue { [request] in $0.append(request) }
                let reply = script(request.path)
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: reply.bytes)), promise: nil)
                if reply.close {
                    context.close(promise: nil)
                    return
                }
            }
        }

        /// The next whole request in the buffer, taken out of it.
        private func take() -> Request? {
            guard let headEnd = buffer.range(of: "\r\n\r\n") else { return nil }
            let head = String(buffer[..<headEnd.lowerBound])
            let rest = buffer[headEnd.upperBound...]
            let probe = Request(head: head, body: "")
            var body = rest[rest.startIndex..<rest.startIndex]
            if let length = probe.header("content-length").first.flatMap({ Int($0) }) {
                guard rest.utf8.count >= length else { return nil }
                body = rest.prefix(length)
            } else if probe.header("transfer-encoding").first == "chunked" {
                guard let end = rest.range(of: "0\r\n\r\n") else { return nil }
                body = rest[..<end.upperBound]
            }
            buffer = String(rest[body.endIndex...])
            return Request(head: head, body: String(body))
        }
    }
}

/// An upstream that takes connections and every byte sent to it, and never answers: a slow API,
/// for what the proxy holds meanwhile. With `certificates`, over TLS: the handshake completes,
/// then nothing.
public final class SilentUpstream: Sendable {
    private let channel: any Channel
    /// `http://127.0.0.1:PORT` (`https://` with TLS), for `proxy.upstream`.
    public let origin: String

    public init(certificates: TestCertificates? = nil) async throws {
        let tls = try certificates.map { certificates in
            try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: try NIOSSLCertificate.fromPEMFile(certificates.serverCertificate).map { .certificate($0) },
                    privateKey: .privateKey(try NIOSSLPrivateKey(file: certificates.serverKey, format: .pem))))
        }
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 4096)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.addHandler(Sink())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        origin = "\(certificates == nil ? "http" : "https")://127.0.0.1:\(channel.localAddress!.port!)"
    }

    public func stop() async {
        try? await channel.close()
    }

    private final class Sink: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    }
}
