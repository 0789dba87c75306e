import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Looks up an upstream named by host name, so that no answer reaches an event loop after the
/// proxy's stop.
///
/// Why not NIO's own resolver: it runs `getaddrinfo` on a queue and completes the answer on the
/// event loop from there. A lookup still running when the proxy's loops shut down then scheduled
/// on a closed loop, which SwiftNIO reports ("Cannot schedule tasks on an EventLoop that has
/// already shut down", a crash in its strict mode): the stop race of issue 36, which a
/// `getaddrinfo` slowed by 20 ms made happen at every stop under a flood. Here every answer is
/// given under one lock, by whoever claims the lookup first: its `getaddrinfo`, a connect that no
/// longer wants it (`cancelQueries`), or the stop, which fails every lookup not yet answered while
/// the loops still run. A `getaddrinfo` that returns later finds its lookup answered and drops its
/// result. An upstream given as an address is never looked up (`UpstreamPools.connect`).
final class UpstreamResolver: Sendable {
    /// The lookup itself: `getaddrinfo` for both families, or a test's slow one.
    typealias LookUp = @Sendable (_ host: String, _ port: Int) throws -> [SocketAddress]

    private struct State {
        /// Lookups not answered yet, by number: the AAAA and A answers of one connect.
        var pending: [UInt64: (v6: EventLoopPromise<[SocketAddress]>, v4: EventLoopPromise<[SocketAddress]>)] = [:]
        var next: UInt64 = 0
        var stopped = false
        /// One queue per event loop, as NIO's resolver has: a slow name server holds up that
        /// loop's new connections, not a thread per waiting connection.
        var queues: [ObjectIdentifier: DispatchQueue] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let addresses: LookUp

    init(lookUp: @escaping LookUp = UpstreamResolver.addresses) {
        addresses = lookUp
    }

    /// Lookups begun and not yet answered.
    var running: Int { state.withLockedValue { $0.pending.count } }

    /// One connect's lookups, on its event loop: NIO's Happy Eyeballs asks for AAAA, then A; one
    /// `getaddrinfo` answers both.
    final class Query: Resolver, Sendable {
        private let resolver: UpstreamResolver
        private let loop: any EventLoop
        private let lookup = NIOLockedValueBox<(id: UInt64, v6: EventLoopFuture<[SocketAddress]>, v4: EventLoopFuture<[SocketAddress]>)?>(nil)

        init(resolver: UpstreamResolver, loop: any EventLoop) {
            self.resolver = resolver
            self.loop = loop
        }

        func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> { started(host, port).v6 }
        func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> { started(host, port).v4 }

        /// The connect is done or gave up: a lookup still queued is answered now and never run.
        func cancelQueries() {
            if let id = lookup.withLockedValue({ $0?.id }) { resolver.answer(id, with: .failure(LookupFailure(description: "no longer wanted"))) }
        }

        private func started(_ host: String, _ port: Int) -> (v6: EventLoopFuture<[SocketAddress]>, v4: EventLoopFuture<[SocketAddress]>) {
            lookup.withLockedValue { lookup in
                if let lookup { return (lookup.v6, lookup.v4) }
                let made = resolver.lookUp(host, port: port, on: loop)
                lookup = made
                return (made.v6, made.v4)
            }
        }
    }

    func query(on loop: any EventLoop) -> Query { Query(resolver: self, loop: loop) }

    /// The proxy stops: every lookup not answered yet fails now, while the loops run; none is
    /// begun after.
    func stop() {
        let mine = state.withLockedValue { state in
            state.stopped = true
            // Off their loops: each answer is only queued, under the lock.
            for (_, promises) in state.pending where !promises.v6.futureResult.eventLoop.inEventLoop {
                Self.complete(promises, with: .failure(LookupFailure(description: "the proxy is stopping")))
            }
            defer { state.pending.removeAll() }
            return state.pending.values.filter { $0.v6.futureResult.eventLoop.inEventLoop }
        }
        for promises in mine { Self.complete(promises, with: .failure(LookupFailure(description: "the proxy is stopping"))) }
    }

    private func lookUp(
        _ host: String, port: Int, on loop: any EventLoop
    ) -> (
        id: UInt64, v6: EventLoopFuture<[SocketAddress]>, v4: EventLoopFuture<[SocketAddress]>
    ) {
        let promises = (v6: loop.makePromise(of: [SocketAddress].self), v4: loop.makePromise(of: [SocketAddress].self))
        let (id, queue) = state.withLockedValue { state -> (UInt64?, DispatchQueue) in
            let queue = state.queues[ObjectIdentifier(loop), default: DispatchQueue(label: "waf-tokend.proxy.resolver")]
            state.queues[ObjectIdentifier(loop)] = queue
            guard !state.stopped else { return (nil, queue) }
            state.next += 1
            state.pending[state.next] = promises
            return (state.next, queue)
        }
        guard let id else {
            Self.complete(promises, with: .failure(LookupFailure(description: "the proxy is stopping")))
            return (0, promises.v6.futureResult, promises.v4.futureResult)
        }
        queue.async { [self] in
            // Answered already (cancelled, or the stop): not looked up at all.
            guard state.withLockedValue({ $0.pending[id] != nil }) else { return }
            answer(id, with: Result { try addresses(host, port) })
        }
        return (id, promises.v6.futureResult, promises.v4.futureResult)
    }

    /// Answers lookup `id` unless it was answered already. From another thread the answer is
    /// handed to the loop under the lock, so that once `stop` returns nothing is; on the loop it
    /// is given after the lock, since the connect's callbacks run at once and may call back here.
    private func answer(_ id: UInt64, with result: Result<[SocketAddress], any Error>) {
        let onLoop = state.withLockedValue { state -> (v6: EventLoopPromise<[SocketAddress]>, v4: EventLoopPromise<[SocketAddress]>)? in
            guard let promises = state.pending.removeValue(forKey: id) else { return nil }
            if promises.v6.futureResult.eventLoop.inEventLoop { return promises }
            Self.complete(promises, with: result)
            return nil
        }
        if let onLoop { Self.complete(onLoop, with: result) }
    }

    private static func complete(
        _ promises: (v6: EventLoopPromise<[SocketAddress]>, v4: EventLoopPromise<[SocketAddress]>), with result: Result<[SocketAddress], any Error>
    ) {
        switch result {
        case .success(let found):
            promises.v6.succeed(found.filter { $0.protocol == .inet6 })
            promises.v4.succeed(found.filter { $0.protocol == .inet })
        case .failure(let error):
            promises.v6.fail(error)
            promises.v4.fail(error)
        }
    }

    private struct LookupFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// `getaddrinfo` for TCP, both families at once.
    @Sendable static func addresses(_ host: String, port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = CInt(SOCK_STREAM.rawValue)
        hints.ai_protocol = CInt(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else { throw LookupFailure(description: "cannot look up \(host): \(String(cString: gai_strerror(status)))") }
        defer { freeaddrinfo(list) }
        var found: [SocketAddress] = []
        var next = list
        while let entry = next?.pointee {
            next = entry.ai_next
            guard let address = entry.ai_addr else { continue }
            switch CInt(address.pointee.sa_family) {
            case AF_INET:
                found.append(address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
            case AF_INET6:
                found.append(address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) })
            default:
                continue
            }
        }
        return found
    }
}
