import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import WAFChallenge

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A self-contained token service for demos, tests and benchmarks: AWS WAF's server side as
/// docs/protocol.md describes it, with a WAF-like protected resource, fault injection and
/// counters.
public final class LocalTokenService: Sendable {
    public struct ConfigurationError: Error, CustomStringConvertible {
        public let description: String
    }

    struct State {
        var faults: [FaultRule]
        var latencyMilliseconds: Int
        var counters = ServiceCounters()
        /// Challenges already exchanged for a token: a challenge is good for one token only.
        var usedAttempts: Set<String> = []
        /// Tokens issued, newest last (a test tool's record: tests check no client leaks them).
        var minted: [String] = []
        var channels: [ObjectIdentifier: any Channel] = [:]
        var server: (any Channel)?
        var url: String?
        /// Tokens minted before this moment are refused by the protected resource, as after the
        /// web ACL's key rotated (`POST /__admin/rotate`).
        var rotatedAt: Date?
        /// The protected resource asks every request for a CAPTCHA (`POST /__admin/captcha`).
        var captcha = false
        /// A token used from another address than the one it was acquired from is challenged
        /// (`--bind-tokens-to-addresses`, `POST /__admin/bind-addresses`).
        var bindTokensToAddresses = false
        /// The address each token was acquired from (its `/verify`'s peer).
        var acquiredFrom: [String: String] = [:]
    }

    public let configuration: LocalTokenServiceConfiguration
    /// `/<12 hex>/<12 hex>`, like a regional web ACL's integration path.
    let pathPrefix: String
    let challenges: ChallengeIssuer
    let tokens: TokenIssuer
    let state: NIOLockedValueBox<State>
    let logger: Logger
    private let tls: NIOSSLContext?

    public init(configuration: LocalTokenServiceConfiguration, logger: Logger = Logger(label: "waf-token-service")) throws {
        if let problem = configuration.problems.first { throw ConfigurationError(description: problem) }
        self.configuration = configuration
        self.logger = logger
        func hex12() -> String {
            (0..<12).map { _ in String(Int.random(in: 0..<16), radix: 16) }.joined()
        }
        pathPrefix = "/\(hex12())/\(hex12())"
        challenges = ChallengeIssuer(
            key: SymmetricKey(size: .bits256), type: configuration.challengeType, difficulty: configuration.difficulty,
            memory: configuration.memory, lifetime: TimeInterval(configuration.challengeLifetimeSeconds))
        tokens = TokenIssuer(key: SymmetricKey(size: .bits256), immunity: TimeInterval(configuration.immunitySeconds))
        var initial = State(faults: configuration.faults, latencyMilliseconds: configuration.latencyMilliseconds)
        initial.bindTokensToAddresses = configuration.bindTokensToAddresses
        state = NIOLockedValueBox(initial)
        if let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
            let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
            let server = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            tls = try NIOSSLContext(configuration: server)
        } else {
            tls = nil
        }
    }

    /// Binds and starts serving; returns the application integration URL.
    @discardableResult
    public func start() async throws -> String {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(NIOHTTPServerRequestAggregator(maxContentLength: 16 << 20))
                    try pipeline.addHandler(LocalTokenServiceHandler(service: self))
                    track(channel)
                }
            }
        let server = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = server.localAddress?.port ?? configuration.port
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let url = "\(tls == nil ? "http" : "https")://\(host):\(port)\(pathPrefix)/"
        state.withLockedValue {
            $0.server = server
            $0.url = url
        }
        logger.info("listening", metadata: ["url": "\(url)"])
        return url
    }

    /// The application integration URL once started.
    public var applicationIntegrationURL: String? { state.withLockedValue { $0.url } }

    /// Stops listening and closes every connection, stalled ones included.
    public func stop() async {
        let (server, channels) = state.withLockedValue { state in
            defer {
                state.server = nil
                state.channels = [:]
            }
            return (state.server, Array(state.channels.values))
        }
        try? await server?.close()
        for channel in channels { try? await channel.close() }
    }

    // MARK: Faults and counters, in process and over `/__admin`

    public func addFault(_ rule: FaultRule) {
        state.withLockedValue { $0.faults.append(rule) }
    }

    public func setLatency(milliseconds: Int) {
        state.withLockedValue { $0.latencyMilliseconds = max(0, milliseconds) }
    }

    /// Refuses every token minted until now at the protected resource, as AWS WAF does once the
    /// web ACL's key rotated; a token fetched afterwards is accepted.
    public func rotateKey() {
        state.withLockedValue { $0.rotatedAt = Date() }
    }

    /// The protected resource answers every request with a CAPTCHA (405 and
    /// `x-amzn-waf-action: captcha`), as a rule that escalates does; false: as before.
    public func askForCaptcha(_ on: Bool) {
        state.withLockedValue { $0.captcha = on }
    }

    /// Clears faults and latency, a rotation and a CAPTCHA; counters too when asked.
    public func reset(counters: Bool = false) {
        state.withLockedValue { state in
            state.faults = []
            state.latencyMilliseconds = 0
            state.rotatedAt = nil
            state.captcha = false
            state.bindTokensToAddresses = configuration.bindTokensToAddresses
            if counters { state.counters = ServiceCounters() }
        }
    }

    public var counters: ServiceCounters { state.withLockedValue { $0.counters } }

    /// The last tokens issued (at most 1000).
    public var mintedTokens: [String] { state.withLockedValue { $0.minted } }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLockedValue { $0.channels[id] = channel }
        channel.closeFuture.whenComplete { [state] _ in state.withLockedValue { $0.channels[id] = nil } }
    }
}
