import CEpoll
import Foundation
import NIOCore
import Synchronization
import Testing
import WAFTestTraits

@testable import WAFProxyLoop

/// What a socket told its delegate, kept for the test's thread.
final class Recorder: LoopSocketDelegate, @unchecked Sendable {
    // Touched on the loop's thread, read by the test through `onLoop`.
    weak var socket: LoopSocket?
    var received = ByteBuffer()
    var connected = false
    var drained = 0
    var closed: Int32?? = nil
    var closes = 0

    func connected(_ socket: LoopSocket) { connected = true }
    func received(_ bytes: ByteBuffer, on socket: LoopSocket) {
        var bytes = bytes
        received.writeBuffer(&bytes)
    }
    func drained(_ socket: LoopSocket) { drained += 1 }
    func closed(_ socket: LoopSocket, error: Int32?) {
        closed = .some(error)
        closes += 1
    }
}

/// Polls `condition` on the loop every 5 ms until it holds (true) or 10 s pass (false).
func eventually(on loop: EpollLoop, _ condition: @escaping @Sendable () -> Bool) throws -> Bool {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        if try onLoop(loop, condition) { return true }
        usleep(5000)
    }
    return false
}

/// A socket made on the loop, with its recorder; unchecked: used on the loop only.
struct OnLoop<T>: @unchecked Sendable {
    let value: T
}

@Suite("The proxy loop's sockets", .offPool)
struct LoopSocketTests {
    static func pair() -> (Int32, Int32) {
        var ends: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        return (ends[0], ends[1])
    }

    @Test("Bytes written in many small pieces arrive whole; the peer's close is reported once, without an error")
    func bytesAndClose() throws {
        let (ours, theirs) = Self.pair()
        try withRunningLoop { loop in
            let recorder = Recorder()
            let socket = OnLoop(value: try onLoop(loop) { OnLoop(value: try LoopSocket(adopting: ours, on: loop)) }.value)
            try onLoop(loop) { socket.value.delegate = recorder }
            let text = (0..<500).map { "line \($0)\n" }.joined()
            for byte in text.utf8 { _ = withUnsafePointer(to: byte) { write(theirs, $0, 1) } }
            #expect(try eventually(on: loop) { recorder.received.readableBytes == text.utf8.count }, "every byte arrives")
            #expect(try onLoop(loop) { String(buffer: recorder.received) } == text)
            close(theirs)
            #expect(try eventually(on: loop) { recorder.closed != nil })
            #expect(try onLoop(loop) { recorder.closed == .some(nil) && recorder.closes == 1 && !socket.value.isOpen })
        }
    }

    @Test("What the kernel cannot take is queued, sent as the peer reads, and `drained` says when it all went")
    func backpressure() throws {
        let (ours, theirs) = Self.pair()
        try withRunningLoop { loop in
            let recorder = Recorder()
            let socket = OnLoop(value: try onLoop(loop) { OnLoop(value: try LoopSocket(adopting: ours, on: loop)) }.value)
            let total = 8 << 20
            let queued = try onLoop(loop) {
                socket.value.delegate = recorder
                for index in 0..<128 { socket.value.send(ByteBuffer(repeating: UInt8(index), count: total / 128)) }
                return socket.value.queuedBytes
            }
            #expect(queued > 0, "8 MiB do not fit a socket's buffer")
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(theirs, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var read = 0
            var last = [UInt8](repeating: 0, count: 65536)
            var inOrder = true
            while read < total {
                let count = Glibc.read(theirs, &last, last.count)
                guard count > 0 else { break }
                for offset in 0..<count where last[offset] != UInt8((read + offset) / (total / 128)) { inOrder = false }
                read += count
            }
            #expect(read == total && inOrder, "every byte, in order")
            #expect(try eventually(on: loop) { recorder.drained == 1 && socket.value.queuedBytes == 0 })
            close(theirs)
        }
    }

    @Test("A connection to a listener is accepted and connected; one to a closed port fails with ECONNREFUSED")
    func connectAndAccept() throws {
        try withRunningLoop { loop in
            let accepted = Mutex(0)
            let listener = OnLoop(
                value: try onLoop(loop) {
                    OnLoop(
                        value: try LoopListener.listen(on: try SocketAddress(ipAddress: "127.0.0.1", port: 0), on: loop) { socket in
                            accepted.withLock { $0 += 1 }
                            socket.send(ByteBuffer(string: "hello"))
                            socket.close()
                        })
                }.value)
            let port = try #require(try onLoop(loop) { listener.value.port })
            let recorder = Recorder()
            let client = OnLoop(
                value: try onLoop(loop) {
                    let socket = try LoopSocket.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: port), on: loop)
                    socket.delegate = recorder
                    return OnLoop(value: socket)
                }.value)
            #expect(try eventually(on: loop) { recorder.connected && String(buffer: recorder.received) == "hello" && recorder.closes == 1 })
            #expect(accepted.withLock { $0 } == 1)
            try onLoop(loop) {
                client.value.close()
                listener.value.close()
            }

            // A port bound but not listening refuses, and stays ours while the test runs.
            let bound = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            defer { close(bound) }
            let any = try SocketAddress(ipAddress: "127.0.0.1", port: 0)
            #expect(any.withSockAddr { bind(bound, $0, socklen_t($1)) } == 0)
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(bound, $0, &length) } }
            let closedPort = Int(UInt16(bigEndian: address.sin_port))
            let refused = Recorder()
            try onLoop(loop) {
                let socket = try LoopSocket.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: closedPort), on: loop)
                socket.delegate = refused
                _ = OnLoop(value: socket)
            }
            #expect(try eventually(on: loop) { refused.closed == .some(ECONNREFUSED) })
        }
    }

    /// A socket on `descriptor` that does not read, reporting to `recorder`, having sent `sending`.
    static func notReading(_ descriptor: Int32, on loop: EpollLoop, _ recorder: Recorder, sending: String? = nil) throws {
        try onLoop(loop) {
            let socket = try LoopSocket(adopting: descriptor, on: loop)
            socket.delegate = recorder
            recorder.socket = socket
            socket.reading = false
            if let sending { socket.send(ByteBuffer(string: sending)) }
        }
    }

    @Test("A socket that does not read, whose peer sent its last words and left: no busy loop; reading again, the words, then the end")
    func peerGoneWhileNotReading() throws {
        let (ours, theirs) = Self.pair()
        try withRunningLoop { loop in
            let recorder = Recorder()
            try Self.notReading(ours, on: loop, recorder)
            _ = write(theirs, "last words", 10)
            close(theirs)
            usleep(200_000)
            #expect(try onLoop(loop) { recorder.socket?.readiness ?? 0 } < 10, "the hang-up wakes the loop once, not at once again and again")
            try onLoop(loop) { recorder.socket?.reading = true }
            #expect(try eventually(on: loop) { recorder.closes == 1 })
            #expect(try onLoop(loop) { String(buffer: recorder.received) == "last words" && recorder.closed == .some(nil) })
        }
    }

    @Test("A socket that does not read, whose peer sent its last words and reset: the words are kept for when it reads, then the reset")
    func peerResetWhileNotReading() throws {
        // A TCP pair over loopback: a reset needs TCP (SO_LINGER 0 on close).
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        defer { close(listening) }
        let any = try SocketAddress(ipAddress: "127.0.0.1", port: 0)
        #expect(any.withSockAddr { bind(listening, $0, socklen_t($1)) } == 0 && listen(listening, 1) == 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listening, $0, &length) } }
        let ours = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        #expect(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(ours, $0, length) } } == 0)
        let theirs = accept4(listening, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
        try withRunningLoop { loop in
            let recorder = Recorder()
            try Self.notReading(ours, on: loop, recorder)
            _ = write(theirs, "last words", 10)
            var abort = linger(l_onoff: 1, l_linger: 0)
            setsockopt(theirs, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
            close(theirs)
            usleep(200_000)
            #expect(try onLoop(loop) { recorder.closes } == 0, "not failed while its peer's last words wait unread")
            try onLoop(loop) { recorder.socket?.reading = true }
            #expect(try eventually(on: loop) { recorder.closes == 1 })
            #expect(try onLoop(loop) { String(buffer: recorder.received) == "last words" && recorder.closed == .some(ECONNRESET) })
        }
    }

    @Test("Writing to a peer that is gone reports EPIPE and closes; it does not end the process")
    func writeToAGonePeer() throws {
        let (ours, theirs) = Self.pair()
        close(theirs)
        try withRunningLoop { loop in
            let recorder = Recorder()
            try Self.notReading(ours, on: loop, recorder, sending: "to nobody")
            #expect(try eventually(on: loop) { recorder.closes == 1 })
            #expect(try onLoop(loop) { recorder.closed == .some(EPIPE) || recorder.closed == .some(ECONNRESET) })
        }
    }
}
