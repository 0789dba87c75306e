import Foundation
import NIOCore
import Synchronization
import Testing
import WAFProxyLoopTestKit
import WAFTestSupport
import WAFTestTraits

@testable import WAFProxyLoop

/// What a stream told its delegate; touched on the loop's thread only.
final class StreamRecorder: LoopStreamDelegate, @unchecked Sendable {
    /// The stream, kept alive here while the test looks at it.
    var stream: LoopStream?
    var received = ""
    var closed: LoopStream.End?

    func received(_ plaintext: ByteBuffer, on stream: LoopStream) { received += String(buffer: plaintext) }
    func drained(_ stream: LoopStream) {}
    func closed(_ stream: LoopStream, end: LoopStream.End) { closed = end }
}

/// A server on the loop that answers each read with `answer(what it read)`, over TLS when given
/// a server context (a libssl session per connection, over its BIO pair), or stays silent.
final class LoopServer: LoopSocketDelegate, @unchecked Sendable {
    let tls: TLSServerContext?
    let answer: ((String) -> String)?
    var peers: [ObjectIdentifier: TLSServerPeer] = [:]
    var listener: LoopListener?
    /// Closes each connection once it answered (plain only).
    var closesAfterAnswer = false

    init(tls: TLSServerContext?, answer: ((String) -> String)?) {
        self.tls = tls
        self.answer = answer
    }

    func start(on loop: EpollLoop) throws -> Int {
        let listener = try LoopListener.listen(on: try SocketAddress(ipAddress: "127.0.0.1", port: 0), on: loop) { [self] socket in
            socket.delegate = self
            if let tls { peers[ObjectIdentifier(socket)] = TLSServerPeer(tls) }
        }
        self.listener = listener
        return listener.port!
    }

    func connected(_ socket: LoopSocket) {}
    func drained(_ socket: LoopSocket) {}
    func closed(_ socket: LoopSocket, error: Int32?) { peers[ObjectIdentifier(socket)] = nil }

    func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        guard let answer else { return }
        guard let peer = peers[ObjectIdentifier(socket)] else {
            socket.send(ByteBuffer(string: answer(String(buffer: bytes))))
            if closesAfterAnswer { socket.close() }
            return
        }
        peer.receive(bytes)
        let text = peer.read()
        if !text.isEmpty { peer.write(answer(text)) }
        let out = peer.takeCiphertext()
        if out.readableBytes > 0 { socket.send(out) }
    }
}

@Suite("Upstream streams on the proxy's loop, plain and TLS", .offPool)
struct LoopStreamTests {
    /// A stream to a `LoopServer` made on the loop, written to at once; its recorder.
    static func stream(
        _ loop: EpollLoop, _ server: LoopServer, tls: (TLSClientContext, String)? = nil, timeout: UInt64 = 10_000_000_000, writing: String
    ) throws -> StreamRecorder {
        let recorder = StreamRecorder()
        let tls = OnLoop(value: tls)
        try onLoop(loop) {
            let port = try server.start(on: loop)
            let stream = try LoopStream(to: try SocketAddress(ipAddress: "127.0.0.1", port: port), tls: tls.value, timeout: timeout, on: loop)
            stream.delegate = recorder
            recorder.stream = stream
            // Written before the connection (and its handshake) is up: it waits for it.
            stream.write(ByteBuffer(string: writing))
            stream.flush()
        }
        return recorder
    }

    @Test("Plain: what is written before the connection is up goes once it is, and the answer comes back")
    func plain() throws {
        try withRunningLoop { loop in
            let recorder = try Self.stream(loop, LoopServer(tls: nil) { "got \($0)" }, writing: "ping")
            #expect(try eventually(on: loop) { recorder.received == "got ping" })
        }
    }

    @Test("TLS: the handshake, then the request written before it, and the answer, in plaintext")
    func overTLS() throws {
        let tls = try TLSFixture()
        try withRunningLoop { loop in
            let recorder = try Self.stream(loop, LoopServer(tls: tls.server) { "got \($0)" }, tls: (tls.client, "localhost"), writing: "ping")
            #expect(try eventually(on: loop) { recorder.received == "got ping" }, "the answer over TLS")
            #expect(try onLoop(loop) { recorder.closed == nil })
        }
    }

    @Test("TLS: a certificate for another name closes the stream with the reason, and nothing was sent")
    func wrongName() throws {
        let tls = try TLSFixture()
        try withRunningLoop { loop in
            let recorder = try Self.stream(
                loop, LoopServer(tls: tls.server) { "got \($0)" }, tls: (tls.client, "elsewhere.example"), writing: "secret")
            #expect(try eventually(on: loop) { recorder.closed != nil })
            #expect(try onLoop(loop) { recorder.closed == .failed("TLS: hostname mismatch") && recorder.received.isEmpty })
        }
    }

    @Test("A server that never finishes the handshake: the stream closes at its timeout, saying so")
    func connectTimeout() throws {
        let context = try TLSClientContext(caFile: nil)
        try withRunningLoop { loop in
            let recorder = try Self.stream(loop, LoopServer(tls: nil, answer: nil), tls: (context, "localhost"), timeout: 100_000_000, writing: "x")
            #expect(try eventually(on: loop) { recorder.closed != nil })
            #expect(try onLoop(loop) { recorder.closed == .timedOut })
        }
    }

    @Test("TLS: what waits for a handshake that does not come counts as queued, so an owner that follows the queue stops reading its other side")
    func waitingForTheHandshakeCounts() throws {
        let context = try TLSClientContext(caFile: nil)
        try withRunningLoop { loop in
            let recorder = try Self.stream(loop, LoopServer(tls: nil, answer: nil), tls: (context, "localhost"), writing: "x")
            let queued = try onLoop(loop) {
                recorder.stream?.write(ByteBuffer(repeating: 0x61, count: 100_000))
                recorder.stream?.flush()
                return recorder.stream?.queuedBytes ?? 0
            }
            #expect(queued >= 100_001, "the plaintext waiting for the handshake: \(queued) bytes counted")
        }
    }

    @Test("Several addresses: one that refuses the connect hands what was written to the next, which answers")
    func nextAddress() throws {
        try withRunningLoop { loop in
            let recorder = StreamRecorder()
            let server = LoopServer(tls: nil) { "got \($0)" }
            try onLoop(loop) {
                let port = try server.start(on: loop)
                // The server listens on 127.0.0.1 only: ::1 refuses, as for an upstream named localhost.
                let addresses = [try SocketAddress(ipAddress: "::1", port: port), try SocketAddress(ipAddress: "127.0.0.1", port: port)]
                let stream = try LoopStream(to: addresses, tls: nil, timeout: 10_000_000_000, on: loop)
                stream.delegate = recorder
                recorder.stream = stream
                stream.write(ByteBuffer(string: "ping"))
                stream.flush()
            }
            #expect(try eventually(on: loop) { recorder.received == "got ping" }, "answered by the second address")
            #expect(try onLoop(loop) { recorder.closed == nil })
        }
    }
}
