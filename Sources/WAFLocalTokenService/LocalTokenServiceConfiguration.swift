import WAFChallenge

/// How the local token service runs (docs/protocol.md, "The local token service").
public struct LocalTokenServiceConfiguration: Sendable {
    public var host: String
    /// 0 picks any free port.
    public var port: Int
    public var difficulty: Int
    public var challengeType: ChallengeType
    /// scrypt's N for scrypt challenges.
    public var memory: Int
    /// How long a token is accepted after it was minted (AWS: the web ACL's immunity time).
    public var immunitySeconds: Int
    /// How long a challenge may take from issue to verify before it counts as expired.
    public var challengeLifetimeSeconds: Int
    /// Domains tokens are issued for, beside the request's own host; their subdomains match too.
    public var tokenDomains: [String]
    /// Answer `/inputs` with a redirect carrying `Cache-Control: max-age=N` (the iOS SDK caches it).
    public var redirectMaxAge: Int?
    /// PEM certificate chain and key: serve https instead of http.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// Faults armed from the start.
    public var faults: [FaultRule]
    /// Added to every token-service answer.
    public var latencyMilliseconds: Int
    /// The protected resource challenges a token used from another address than the one it was
    /// fetched from, as Bot Control's token-reuse rules do (`TGT_TokenReuseIp`, EGRESS-1's test).
    public var bindTokensToAddresses: Bool

    public init(
        host: String = "127.0.0.1", port: Int = 0, difficulty: Int = 8, challengeType: ChallengeType = .sha256,
        memory: Int = 128, immunitySeconds: Int = 300, challengeLifetimeSeconds: Int = 300,
        tokenDomains: [String] = ["localhost", "127.0.0.1"], redirectMaxAge: Int? = nil,
        tlsCertificateFile: String? = nil, tlsKeyFile: String? = nil, faults: [FaultRule] = [],
        latencyMilliseconds: Int = 0, bindTokensToAddresses: Bool = false
    ) {
        self.host = host
        self.port = port
        self.difficulty = difficulty
        self.challengeType = challengeType
        self.memory = memory
        self.immunitySeconds = immunitySeconds
        self.challengeLifetimeSeconds = challengeLifetimeSeconds
        self.tokenDomains = tokenDomains
        self.redirectMaxAge = redirectMaxAge
        self.tlsCertificateFile = tlsCertificateFile
        self.tlsKeyFile = tlsKeyFile
        self.faults = faults
        self.latencyMilliseconds = latencyMilliseconds
        self.bindTokensToAddresses = bindTokensToAddresses
    }

    /// What is wrong with this configuration, if anything.
    public var problems: [String] {
        var problems: [String] = []
        if !Challenge.difficultyRange.contains(difficulty) {
            problems.append("difficulty \(difficulty) is outside \(Challenge.difficultyRange)")
        }
        if !challengeType.isSolvable { problems.append("challenge type \(challengeType.name) is not served") }
        if !(0...65535).contains(port) { problems.append("port \(port) is outside 0…65535") }
        if immunitySeconds < 1 { problems.append("immunity \(immunitySeconds) s must be at least 1") }
        if challengeLifetimeSeconds < 1 { problems.append("challenge lifetime must be at least 1 s") }
        if (tlsCertificateFile == nil) != (tlsKeyFile == nil) {
            problems.append("https needs both a certificate and a key file")
        }
        let puzzle = ProofOfWork(type: challengeType, input: "", checksum: "", difficulty: difficulty, memory: memory, nonceFormat: .decimal)
        if let reason = puzzle.unsolvableReason { problems.append(reason) }
        return problems
    }
}
