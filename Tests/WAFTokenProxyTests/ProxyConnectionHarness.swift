import CEpoll
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore
import WAFTokenCoreTestKit

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFProxyLoop
@testable import WAFTokenProxy

#if canImport(Glibc)
import Glibc
#endif

/// The harness of `ProxyConnectionTests`: a proxy connection on a loop the test steps, its client
/// and its upstreams the test's ends of socketpairs.
extension ProxyConnectionTests {
    /// The upstream connections the proxy made, in order: the test's ends of their socketpairs.
    final class Upstreams: Sendable {
        private let state = NIOLockedValueBox((made: [Int32](), unreachable: 0, closedAtOnce: 0))

        var made: [Int32] { state.withLockedValue { $0.made } }

        /// The upstream's end of connection `index` goes away; closed once only (the harness
        /// closes the rest), so as not to close a descriptor another test has been given since.
        /// Shut down first: a child another test is spawning holds a copy of every descriptor until
        /// its exec, and a close alone would be no end of file to the proxy until then.
        func close(_ index: Int) {
            let descriptor = take(index)
            if descriptor >= 0 {
                shutdown(descriptor, Int32(SHUT_RDWR))
                Glibc.close(descriptor)
            }
        }
        /// The upstream's end of connection `index` goes with the request it was sent still unread:
        /// the proxy reads a reset (ECONNRESET), not an end of file.
        func reset(_ index: Int) {
            let descriptor = take(index)
            if descriptor >= 0 { Glibc.close(descriptor) }
        }
        private func take(_ index: Int) -> Int32 {
            state.withLockedValue { state in
                defer { state.made[index] = -1 }
                return state.made[index]
            }
        }

        /// The upstream's end of connection `index` stops reading: a write to it fails (EPIPE)
        /// with nothing taken, as one to a peer that reset the connection does.
        func shutDownReading(_ index: Int) {
            let descriptor = state.withLockedValue { $0.made[index] }
            if descriptor >= 0 { shutdown(descriptor, Int32(SHUT_RD)) }
        }
        func failNext(unreachable: Int = 0, closedAtOnce: Int = 0) {
            state.withLockedValue {
                $0.unreachable = unreachable
                $0.closedAtOnce = closedAtOnce
            }
        }

        func connect(on loop: EpollLoop) -> LoopStream? {
            let (unreachable, closing) = state.withLockedValue { state -> (Bool, Bool) in
                if state.unreachable > 0 {
                    state.unreachable -= 1
                    return (true, false)
                }
                defer { state.closedAtOnce = max(0, state.closedAtOnce - 1) }
                return (false, state.closedAtOnce > 0)
            }
            guard !unreachable else { return nil }
            let (ours, theirs) = Self.pair()
            guard let socket = try? LoopSocket(adopting: ours, on: loop) else { return nil }
            // The upstream is gone before the request is flushed to it: the write fails inside the flush.
            if closing { Glibc.close(theirs) }
            state.withLockedValue { $0.made.append(closing ? -1 : theirs) }
            return LoopStream(connected: socket, on: loop)
        }

        /// Close-on-exec, as every descriptor of the tests' own: a daemon another test spawns in the
        /// same moment would otherwise keep a copy of the proxy's end, and the close above would be
        /// no end of file to the client for as long as that daemon lives.
        static func pair() -> (Int32, Int32) {
            var ends: [Int32] = [0, 0]
            precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
            return (ends[0], ends[1])
        }
    }

    /// One client connection through a proxy whose provider holds `token-1`.
    final class Harness {
        // Released in this order: the loop last, as it outlives its sockets in the proxy.
        let connection: ProxyConnection
        let worker: ProxyWorker
        let upstreams = Upstreams()
        let proxy: ProxyContext
        let scheduler = VirtualScheduler()
        let client: Int32
        let loop: EpollLoop

        /// `later`: what the token service answers after the first token.
        /// `tcpClient`: the client's connection is TCP on loopback (where a reset exists), not a socketpair.
        init(
            upstreamTimeout: Int = 30, tokenWait: Int = 5, later: ScriptedTokenFetcher.Step = .success, tcpClient: Bool = false,
            budget: MemoryBudget = MemoryBudget(total: 16 << 20)
        ) throws {
            let loop = try EpollLoop()
            self.loop = loop
            let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            let provider = WAFTokenProvider(
                configuration: try WAFConfiguration(applicationIntegrationUrl: ProxyRouteTests.first, domainName: "example.com"),
                fetcher: ScriptedTokenFetcher(scheduler: scheduler, script: [.success], then: later), scheduler: scheduler,
                options: .init(jitter: false, logger: quiet))
            scheduler.runUntilIdle()
            let policy = AccessPolicy(allowedUsers: [], allowedGroups: [], logger: quiet)
            let upstreams = upstreams
            proxy = try ProxyContext(
                entry: ProviderEntry(name: "default", provider: provider, access: policy),
                settings: ProxyRouteTests.settings(
                    ProxyRouteTests.first, upstream: "http://127.0.0.1:8080/base/", tokenWait: tokenWait, upstreamTimeout: upstreamTimeout),
                connection: .init(policy: policy, idleTimeout: .seconds(60), requestTimeout: .seconds(10)), metrics: ProxyRouteTests.NoMetrics(),
                logger: quiet, budget: budget, connector: { _, loop in upstreams.connect(on: loop) })
            let worker = ProxyWorker(loop: loop, proxy: proxy, peers: .unixSocket, open: OpenConnections())
            self.worker = worker
            let (ours, theirs) = tcpClient ? Self.tcpPair() : Upstreams.pair()
            client = theirs
            connection = ProxyConnection(try LoopSocket(adopting: ours, on: loop), proxy: proxy, worker: worker)
            connection.admit(PeerCredentials(pid: 1, uid: 1000, gid: 1000))
        }

        deinit {
            connection.ended()
            worker.pool.closeIdle()
            close(client)
            for made in upstreams.made where made >= 0 { close(made) }
        }

        /// Both ends of a TCP connection on loopback: the server's (accepted), then the client's.
        static func tcpPair() -> (Int32, Int32) {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    precondition(bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0)
                }
            }
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { precondition(connect(client, $0, length) == 0) }
            }
            let server = accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            close(listener)
            return (server, client)
        }

        func run() {
            scheduler.runUntilIdle()
            loop.runPending()
        }

        /// Runs the loop until `done`, or fails the test at the deadline: for what comes through a
        /// close, which a child another test is spawning may hold up until its exec.
        func run(until done: () -> Bool, _ what: String, within timeout: Duration = .seconds(5)) {
            let deadline = ContinuousClock.now + timeout
            run()
            while !done() {
                guard ContinuousClock.now < deadline else {
                    Issue.record("not within \(timeout): \(what)")
                    return
                }
                usleep(1000)
                run()
            }
        }

        func send(_ text: String) {
            Self.write(client, text)
            run()
        }

        func answer(_ text: String, on index: Int = 0) {
            Self.write(upstreams.made[index], text)
            run()
        }

        static func write(_ descriptor: Int32, _ text: String) {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let result = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard result > 0 else { return }
                sent += result
            }
        }

        /// Everything the proxy wrote to `descriptor` so far, as text (`nil`: it closed its end).
        static func written(_ descriptor: Int32) -> String? {
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 {
                    text += String(decoding: buffer[..<count], as: UTF8.self)
                    continue
                }
                return count == 0 && text.isEmpty ? nil : text
            }
        }

        /// Whether `descriptor` reads an end of file, with nothing before it, within `timeout`.
        static func endOfFile(_ descriptor: Int32, within timeout: Duration) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 50) > 0 else { continue }
                return written(descriptor) == nil
            }
            return false
        }

        var clientSaw: String { Self.written(client) ?? "<closed>" }
        func upstreamSaw(_ index: Int = 0) -> String { Self.written(upstreams.made[index]) ?? "<closed>" }
    }
}
