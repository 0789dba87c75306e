import AsyncHTTPClient
import WAFChallenge

extension HTTPTokenFetcher {
    public struct Settings: Sendable {
        /// The `client` sent to the service: `ios`, `android` or `browser`; it picks nonce formats.
        public var client: String
        /// Per request (challenge, then verify).
        public var timeout: Duration
        /// PEM file of CA certificates to trust instead of the system's store.
        public var caFile: String?
        public var checksum: String
        public var solver: ProofOfWorkSolver
        /// Larger answers are refused: a token service's answers are a few hundred bytes.
        public var maximumBodyBytes: Int
        /// The forward proxy requests go through (`CONNECT` for https), nil: directly (EGRESS-1).
        public var proxy: HTTPClient.Configuration.Proxy?

        public static let clients: Set<String> = ["ios", "android", "browser"]

        public init(
            client: String = "ios", timeout: Duration = .seconds(10), caFile: String? = nil,
            checksum: String = VerifyRequest.mobileChecksum, solver: ProofOfWorkSolver = ProofOfWorkSolver(),
            maximumBodyBytes: Int = 64 * 1024, proxy: HTTPClient.Configuration.Proxy? = nil
        ) {
            self.client = client
            self.timeout = timeout
            self.caFile = caFile
            self.checksum = checksum
            self.solver = solver
            self.maximumBodyBytes = maximumBodyBytes
            self.proxy = proxy
        }
    }
}
