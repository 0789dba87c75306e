import Foundation
import NIOCore
import Testing
import WAFTestTraits

@testable import WAFProxyLoop

@Suite("The proxy loop's upstream pool", .offPool)
struct LoopStreamPoolTests {
    /// A pool and the address its new connections go to, as the proxy uses them.
    final class Pool {
        let pool: LoopStreamPool
        let address: SocketAddress
        let loop: EpollLoop

        init(_ pool: LoopStreamPool, address: SocketAddress, loop: EpollLoop) {
            self.pool = pool
            self.address = address
            self.loop = loop
        }

        /// The pool's most recent connection (reused), or a new one.
        func acquire() throws -> (LoopStream, Bool) {
            if let (stream, _) = pool.take() { return (stream, true) }
            return (try LoopStream(to: address, tls: nil, timeout: 10_000_000_000, on: loop), false)
        }

        func release(_ stream: LoopStream) { pool.release(stream) }
        var idleCount: Int { pool.idleCount }
    }

    /// A pool to a plain server on the loop that answers "ok" to anything.
    static func pool(
        _ loop: EpollLoop, idleTimeout: UInt64 = 10_000_000_000, maximumIdle: Int = 4, closing: Bool = false
    ) throws
        -> OnLoop<Pool>
    {
        try onLoop(loop) {
            let server = LoopServer(tls: nil) { _ in "ok" }
            server.closesAfterAnswer = closing
            let port = try server.start(on: loop)
            return OnLoop(
                value: Pool(
                    LoopStreamPool(idleTimeout: idleTimeout, maximumIdle: maximumIdle, on: loop),
                    address: try SocketAddress(ipAddress: "127.0.0.1", port: port), loop: loop))
        }
    }

    /// One exchange on a connection of the pool: written, answered, given back. Whether it was reused.
    static func exchange(_ loop: EpollLoop, _ pool: OnLoop<Pool>) throws -> Bool {
        let recorder = StreamRecorder()
        let reused = try onLoop(loop) {
            let (stream, reused) = try pool.value.acquire()
            stream.delegate = recorder
            recorder.stream = stream
            stream.write(ByteBuffer(string: "ping"))
            stream.flush()
            return reused
        }
        #expect(try eventually(on: loop) { recorder.received == "ok" })
        try onLoop(loop) {
            if let stream = recorder.stream { pool.value.release(stream) }
            recorder.stream = nil
        }
        return reused
    }

    @Test("A connection given back is taken again by the next request; a full pool closes what it cannot keep")
    func reuse() throws {
        try withRunningLoop { loop in
            let pool = try Self.pool(loop, maximumIdle: 1)
            #expect(try Self.exchange(loop, pool) == false, "the first is new")
            #expect(try Self.exchange(loop, pool) == true, "the second reuses it")
            #expect(try onLoop(loop) { pool.value.idleCount } == 1)
            let extra = try onLoop(loop) {
                let (first, _) = try pool.value.acquire()
                let (second, reused) = try pool.value.acquire()
                pool.value.release(first)
                pool.value.release(second)
                return OnLoop(value: (second, reused))
            }
            #expect(extra.value.1 == false)
            #expect(try onLoop(loop) { pool.value.idleCount == 1 && !extra.value.0.isOpen }, "one kept, the other closed")
        }
    }

    @Test("A connection unused for the idle timeout is closed, and the next request gets a new one")
    func idleTimeout() throws {
        try withRunningLoop { loop in
            let pool = try Self.pool(loop, idleTimeout: 50_000_000)
            #expect(try Self.exchange(loop, pool) == false)
            #expect(try eventually(on: loop) { pool.value.idleCount == 0 }, "closed after 50 ms")
            #expect(try Self.exchange(loop, pool) == false, "a new one")
        }
    }

    @Test("A connection its peer closes while it waits in the pool leaves the pool at once")
    func closedWhileWaiting() throws {
        try withRunningLoop { loop in
            let pool = try Self.pool(loop, closing: true)
            #expect(try Self.exchange(loop, pool) == false)
            #expect(try eventually(on: loop) { pool.value.idleCount == 0 }, "the close seen while it waited")
            #expect(try Self.exchange(loop, pool) == false, "the next request gets a new one")
        }
    }
}
