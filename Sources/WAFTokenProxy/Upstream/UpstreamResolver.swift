import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import WAFProxyLoop

#if canImport(Glibc)
import Glibc
#endif

/// Looks up an upstream named by host name off the loops (`getaddrinfo` blocks), one queue per
/// loop as NIO's resolver had: a slow name server holds up that loop's new connections, not a
/// thread per waiting connection. Every answer is given under one lock, by whoever claims the
/// lookup first: its `getaddrinfo`, or the stop, which fails every lookup not answered yet while
/// the loops still run (issue 36's race: an answer after the loops ended). A `getaddrinfo` that
/// returns later finds its lookup answered and drops its result; a lookup still queued at the
/// stop, or cancelled by a request that is gone, never runs. An upstream given as an address is never looked up (`UpstreamPool`).
final class UpstreamResolver: Sendable {
    /// The lookup itself: `getaddrinfo` for both families, or a test's slow one.
    typealias LookUp = @Sendable (_ host: String, _ port: Int) throws -> [SocketAddress]
    typealias Answer = Result<[SocketAddress], LookupFailure>

    private struct State {
        /// Lookups not answered yet, by number, each with its loop and its caller's callback.
        var pending: [UInt64: (loop: EpollLoop, done: LoopBound<(Answer) -> Void>)] = [:]
        var next: UInt64 = 0
        var stopped = false
        var queues: [ObjectIdentifier: DispatchQueue] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let addresses: LookUp

    init(lookUp: @escaping LookUp = UpstreamResolver.addresses) {
        addresses = lookUp
    }

    /// Lookups begun and not yet answered.
    var running: Int { state.withLockedValue { $0.pending.count } }

    /// Looks `host` up; `done` runs on `loop` with the addresses, or the failure (the stop's too),
    /// unless the lookup is cancelled first with the number returned (nil: answered already).
    @discardableResult
    func lookUp(_ host: String, port: Int, on loop: EpollLoop, _ done: @escaping (Answer) -> Void) -> UInt64? {
        let bound = LoopBound(done, on: loop)
        let (id, queue) = state.withLockedValue { state -> (UInt64?, DispatchQueue) in
            let queue = state.queues[ObjectIdentifier(loop), default: DispatchQueue(label: "waf-tokend.proxy.resolver")]
            state.queues[ObjectIdentifier(loop)] = queue
            guard !state.stopped else { return (nil, queue) }
            state.next += 1
            state.pending[state.next] = (loop, bound)
            return (state.next, queue)
        }
        guard let id else {
            done(.failure(LookupFailure(description: "the proxy is stopping")))
            return nil
        }
        queue.async { [self] in
            // Answered already (the stop) or no longer wanted: not looked up at all.
            guard state.withLockedValue({ $0.pending[id] != nil }) else { return }
            answer(id, with: Result { () throws(LookupFailure) in try Self.look(host, port, addresses) })
        }
        return id
    }

    /// The request that wanted lookup `id` is gone: it is not run if still queued, and its answer,
    /// if it comes, is dropped. A slow name server then holds up only the lookups still wanted.
    func cancel(_ id: UInt64) {
        _ = state.withLockedValue { $0.pending.removeValue(forKey: id) }
    }

    /// The proxy stops: every lookup not answered yet fails now, while the loops run; none is
    /// begun after.
    func stop() {
        state.withLockedValue { state in
            state.stopped = true
            for (_, waiting) in state.pending { Self.hand(.failure(LookupFailure(description: "the proxy is stopping")), to: waiting) }
            state.pending.removeAll()
        }
    }

    /// Answers lookup `id` unless it was answered already; handed to its loop under the lock, so
    /// that once `stop` returns nothing is.
    private func answer(_ id: UInt64, with result: Answer) {
        state.withLockedValue { state in
            guard let waiting = state.pending.removeValue(forKey: id) else { return }
            Self.hand(result, to: waiting)
        }
    }

    private static func hand(_ result: Answer, to waiting: (loop: EpollLoop, done: LoopBound<(Answer) -> Void>)) {
        let done = waiting.done
        waiting.loop.execute { done.value(result) }
    }

    private static func look(_ host: String, _ port: Int, _ addresses: LookUp) throws(LookupFailure) -> [SocketAddress] {
        do {
            return try addresses(host, port)
        } catch let failure as LookupFailure {
            throw failure
        } catch {
            throw LookupFailure(description: "\(error)")
        }
    }

    struct LookupFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// `getaddrinfo` for TCP, both families at once, in the system's order of preference.
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
