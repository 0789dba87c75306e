/// One proof-of-work puzzle: find a nonce whose digest of `input + checksum + nonce` has at least
/// `difficulty` leading zero bits (docs/protocol.md §2).
public struct ProofOfWork: Sendable, Hashable {
    public static let pbkdf2Iterations = 1000
    public static let pbkdf2SaltLength = 12
    public static let scryptBlockSize = 8
    /// scrypt's memory cost: a power of two, bounded so that one solve cannot take the machine's
    /// memory (65536 × 8 × 128 bytes = 64 MiB per worker).
    public static let scryptMemoryRange = 2...65536

    public let type: ChallengeType
    public let input: String
    public let checksum: String
    public let difficulty: Int
    public let memory: Int
    public let nonceFormat: NonceFormat

    public init(
        type: ChallengeType, input: String, checksum: String, difficulty: Int, memory: Int = 128,
        nonceFormat: NonceFormat
    ) {
        self.type = type
        self.input = input
        self.checksum = checksum
        self.difficulty = difficulty
        self.memory = memory
        self.nonceFormat = nonceFormat
    }

    /// Why this puzzle cannot be solved here, or nil.
    public var unsolvableReason: String? {
        if !type.isSolvable { return "the \(type.name) challenge is for browsers only" }
        if type == .scrypt {
            let valid = Self.scryptMemoryRange.contains(memory) && memory & (memory - 1) == 0
            if !valid { return "scrypt memory \(memory) is not a power of two in \(Self.scryptMemoryRange)" }
        }
        return nil
    }

    /// The digest for `nonce`, written out as the solution string.
    public func digest(nonce: String) throws(ProofOfWorkError) -> [UInt8] {
        var hasher = try NonceHasher(self, nonceCapacity: nonce.utf8.count)
        return try hasher.digest(nonce: nonce.utf8)
    }

    /// Whether `nonce` solves the puzzle.
    public func isSolved(by nonce: String) -> Bool {
        guard let digest = try? digest(nonce: nonce) else { return false }
        return Self.leadingZeroBits(digest) >= difficulty
    }

    /// Leading zero bits, most significant bit of byte 0 first.
    @inline(__always)
    public static func leadingZeroBits(_ bytes: some Sequence<UInt8>) -> Int {
        var count = 0
        for byte in bytes {
            if byte != 0 { return count + byte.leadingZeroBitCount }
            count += 8
        }
        return count
    }
}

public enum ProofOfWorkError: Error, Sendable, Equatable, CustomStringConvertible {
    case unsolvable(String)
    case hashFailed(String)
    case cancelled
    case timedOut(afterNonces: Int)

    public var description: String {
        switch self {
        case .unsolvable(let reason): reason
        case .hashFailed(let reason): "hashing failed: \(reason)"
        case .cancelled: "solving was cancelled"
        case .timedOut(let tried): "no solution within the time limit (\(tried) nonces tried)"
        }
    }
}
