import Configuration
import Crypto
import Logging
import NIOCore
import NIOPosix
import WAFDaemonTransport
import WAFTokenCore

extension ConformanceWarmup {
    /// What `waf-tokend` asks before `READY=1` with a token in its state directory, in the order
    /// it asks (`Benchmarks/conformance-checks.sh` lists them, by a `gdb` breakpoint on each of
    /// the runtime's conformance entry points): asked in that order, the warm-up keeps as far
    /// ahead of the start as its head start allows. Not the
    /// questions that the making of NIO's singleton loops asks (swift-atomics' `ManagedAtomic`,
    /// NIO's registrations and pools): the warm-up starts once they are made.
    @Sendable public static func daemon() -> [Check] {
        let atomicValue = Name.mangled("7Atomics11AtomicValue_pXp")
        let hashable = Name.type((any Hashable.Type).self)
        let comparable = Name.type((any Comparable.Type).self)
        let collection = Name.type((any Collection.Type).self)
        let inbound = Name.type((any _ChannelInboundHandler.Type).self)
        let outbound = Name.type((any _ChannelOutboundHandler.Type).self)
        let headHandler = Name.mangled("7NIOCore18HeadChannelHandlerC")
        let tailHandler = Name.mangled("7NIOCore18TailChannelHandlerC")
        let acceptHandler = Name.mangled("8NIOPosix15ServerBootstrapC13AcceptHandlerC")
        return [
            // The configuration: its keys, swift-configuration's providers, the logger.
            Check(.type(String.self), hashable),
            Check(.type(WAFConfigurationKey.self), hashable),
            Check(.type(AbsoluteConfigKey.self), hashable),
            Check(.type(EnvironmentVariablesProvider.self), .type((any ConfigProvider.Type).self)),
            Check(.type([String].self), collection),
            Check(.type(WAFTokenIdentity.self), hashable),
            Check(.type(StreamLogHandler.self), .type((any LogHandler.Type).self)),
            Check(.type(Never.self), .type((any Error.Type).self)),
            // The providers and their egress, the state file, the token restored.
            Check(.type(UInt32.self), comparable),
            Check(.mangled("14WAFTokenDaemon13OutboundRouteV5ProxyVSg"), hashable),
            Check(.type(UInt32.self), hashable),
            Check(.mangled("13SystemPackage0A6StringV"), collection),
            Check(.type(Int.self), comparable),
            Check(.type(MemoryBudget.Account.self), hashable),
            Check(.type(UInt64.self), hashable),
            Check(.type(SHA256.self), .mangled("6Crypto27BoringSSLBackedHashFunction_pXp")),
            Check(.type(ProviderMachine.ID.self), hashable),
            // The socket API's listener: NIO's server socket and its pipeline's handlers.
            Check(.mangled("8NIOPosix12ServerSocketC"), .mangled("8NIOPosix18BaseSocketProtocol_pXp")),
            Check(.type(Bool.self), atomicValue),
            Check(headHandler, inbound),
            Check(headHandler, outbound),
            Check(tailHandler, inbound),
            Check(tailHandler, outbound),
            Check(.type(AcceptLimitHandler.self), inbound),
            Check(.type(AcceptLimitHandler.self), outbound),
            Check(acceptHandler, inbound),
            Check(acceptHandler, outbound),
            Check(.type(Int.self), hashable),
            Check(.type(ObjectIdentifier.self), hashable),
            Check(.type((any Error).self), .type((any Error.Type).self)),
        ]
    }
}
