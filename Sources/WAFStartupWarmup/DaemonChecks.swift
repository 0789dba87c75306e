import NIOCore
import WAFDaemonTransport

extension ConformanceWarmup {
    /// What the release `waf-tokend` asks before `READY=1` with a token in its state directory,
    /// in the order it asks (`Benchmarks/conformance-checks.sh` lists them, by a `gdb` breakpoint
    /// on each of the runtime's conformance entry points): asked in that order, the warm-up keeps
    /// as far ahead of the start as its head start allows. The release build names concrete
    /// generic types by their metadata accessors (scripts/swift-release.sh), which are handed
    /// their conformances: what is left is the dynamic casts (NIO's pipeline asks each handler
    /// whether it is inbound and outbound), the few the prebuilt standard library asks, and the
    /// server channel's generic superclass, which the runtime finds by name. A debug build asks
    /// more, by mangled names; it is not what starts in production.
    @Sendable public static func daemon() -> [Check] {
        let inbound = Name.type((any _ChannelInboundHandler.Type).self)
        let outbound = Name.type((any _ChannelOutboundHandler.Type).self)
        let headHandler = Name.mangled("7NIOCore18HeadChannelHandlerC")
        let tailHandler = Name.mangled("7NIOCore18TailChannelHandlerC")
        let acceptHandler = Name.mangled("8NIOPosix15ServerBootstrapC13AcceptHandlerC")
        return [
            // The configuration and the providers, inside the standard library.
            Check(.type([String].self), .type((any Collection.Type).self)),
            Check(.type(Int.self), .type((any Comparable.Type).self)),
            Check(.type(String.self), .type((any Hashable.Type).self)),
            // The socket API's listener: NIO's server socket and its pipeline's handlers.
            Check(.mangled("8NIOPosix12ServerSocketC"), .mangled("8NIOPosix18BaseSocketProtocol_pXp")),
            Check(headHandler, inbound),
            Check(headHandler, outbound),
            Check(tailHandler, inbound),
            Check(tailHandler, outbound),
            Check(.type(AcceptLimitHandler.self), inbound),
            Check(.type(AcceptLimitHandler.self), outbound),
            Check(acceptHandler, inbound),
            Check(acceptHandler, outbound),
        ]
    }
}
