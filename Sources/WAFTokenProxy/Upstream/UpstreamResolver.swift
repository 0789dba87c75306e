import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Looks up an upstream named by host name, and knows how many lookups are still running.
///
/// Why not NIO's own resolver: it runs `getaddrinfo` on a queue of its own and completes the
/// answer on the event loop from that queue. A lookup still running when the proxy's loops shut
/// down then schedules on a closed loop, which SwiftNIO reports ("Cannot schedule tasks on an
/// EventLoop that has already shut down", a crash in its strict mode). That is the stop race of
/// issue 36: a delay of 20 ms put into `getaddrinfo` made it happen at every stop under a flood.
/// The proxy stops the resolver and waits for `running` to reach zero before it shuts its loops
/// down. An upstream
/// given as an address is never looked up at all (`UpstreamPools.connect`).
final class UpstreamResolver: Sendable {
    private let lookups = NIOLockedValueBox(0)
    /// Set when the proxy stops: lookups still queued answer at once instead of waiting their turn.
    private let stopping = NIOLockedValueBox(false)
    /// One lookup at a time, as NIO's resolver does per loop: a slow name server holds up new
    /// upstream connections, not a thread per waiting connection.
    private let queue = DispatchQueue(label: "waf-tokend.proxy.resolver")
    /// The lookup itself: `getaddrinfo`, or a test's slow one.
    typealias LookUp = @Sendable (_ host: String, _ port: Int, _ family: CInt) throws -> [SocketAddress]
    private let addresses: LookUp

    init(lookUp: @escaping LookUp = UpstreamResolver.addresses) {
        addresses = lookUp
    }

    /// Lookups begun and not yet handed to their event loop.
    var running: Int { lookups.withLockedValue { $0 } }

    /// The proxy is stopping: the lookup under way finishes, those queued behind it fail now.
    func stop() { stopping.withLockedValue { $0 = true } }

    /// One connection's lookups, on its event loop (NIO's Happy Eyeballs asks for AAAA, then A).
    struct Query: Resolver, Sendable {
        let resolver: UpstreamResolver
        let loop: any EventLoop

        func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
            resolver.lookUp(host, port: port, family: AF_INET, on: loop)
        }

        func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
            resolver.lookUp(host, port: port, family: AF_INET6, on: loop)
        }

        /// A `getaddrinfo` cannot be cancelled; its answer is dropped by the connector.
        func cancelQueries() {}
    }

    func query(on loop: any EventLoop) -> Query { Query(resolver: self, loop: loop) }

    private func lookUp(_ host: String, port: Int, family: CInt, on loop: any EventLoop) -> EventLoopFuture<[SocketAddress]> {
        let promise = loop.makePromise(of: [SocketAddress].self)
        lookups.withLockedValue { $0 += 1 }
        queue.async { [lookups, stopping, addresses] in
            if stopping.withLockedValue({ $0 }) {
                promise.fail(LookupFailure(description: "the proxy is stopping"))
            } else {
                promise.completeWith(Result { try addresses(host, port, family) })
            }
            // Counted down once the answer is on its loop's queue: from here nothing schedules.
            lookups.withLockedValue { $0 -= 1 }
        }
        return promise.futureResult
    }

    private struct LookupFailure: Error, CustomStringConvertible {
        let description: String
    }

    @Sendable static func addresses(_ host: String, port: Int, family: CInt) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = family
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
