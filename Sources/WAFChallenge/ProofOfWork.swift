import Crypto
import _CryptoExtras

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
        var hasher = try NonceHasher(self)
        return try hasher.digest(nonceBytes: Array(nonce.utf8))
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

/// The per-worker hashing state. `input + checksum` is the same for every nonce: SHA-256 hashes it
/// once and copies that state per nonce; the KDFs keep it in a reusable password buffer.
struct NonceHasher {
    private enum Kind {
        case sha256(prefix: SHA256)
        case pbkdf2(salt: [UInt8])
        case scrypt(salt: [UInt8], memory: Int)
    }

    private let kind: Kind
    private var password: [UInt8]
    private let baseCount: Int
    let format: NonceFormat

    init(_ work: ProofOfWork) throws(ProofOfWorkError) {
        if let reason = work.unsolvableReason { throw .unsolvable(reason) }
        let base = Array((work.input + work.checksum).utf8)
        format = work.nonceFormat
        baseCount = base.count
        password = base
        password.reserveCapacity(base.count + 20)
        switch work.type {
        case .sha256:
            var prefix = SHA256()
            prefix.update(data: base)
            kind = .sha256(prefix: prefix)
        case .pbkdf2:
            kind = .pbkdf2(salt: Array(work.checksum.utf8.prefix(ProofOfWork.pbkdf2SaltLength)))
        case .scrypt:
            kind = .scrypt(salt: Array(work.checksum.utf8), memory: work.memory)
        case .networkBandwidth:
            throw .unsolvable("the \(work.type.name) challenge is for browsers only")
        }
    }

    /// Leading zero bits of the digest for nonce number `nonce`.
    @inline(__always)
    mutating func leadingZeroBits(nonce: Int) throws(ProofOfWorkError) -> Int {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer throws(ProofOfWorkError) in
            let count = format.write(nonce, into: buffer)
            return try leadingZeroBits(nonceBytes: UnsafeBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    mutating func digest(nonceBytes: [UInt8]) throws(ProofOfWorkError) -> [UInt8] {
        try nonceBytes.withUnsafeBufferPointer { bytes throws(ProofOfWorkError) in
            try withDigest(nonceBytes: bytes) { Array($0) }
        }
    }

    private mutating func leadingZeroBits(nonceBytes: UnsafeBufferPointer<UInt8>) throws(ProofOfWorkError) -> Int {
        try withDigest(nonceBytes: nonceBytes) { ProofOfWork.leadingZeroBits($0) }
    }

    private mutating func withDigest<T>(
        nonceBytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeRawBufferPointer) -> T
    ) throws(ProofOfWorkError) -> T {
        switch kind {
        case .sha256(let prefix):
            var hash = prefix
            hash.update(bufferPointer: UnsafeRawBufferPointer(nonceBytes))
            return hash.finalize().withUnsafeBytes(body)
        case .pbkdf2(let salt):
            setNonce(nonceBytes)
            do {
                let key = try KDF.Insecure.PBKDF2.deriveKey(
                    from: password, salt: salt, using: .sha256, outputByteCount: 32,
                    unsafeUncheckedRounds: ProofOfWork.pbkdf2Iterations)
                return key.withUnsafeBytes(body)
            } catch {
                throw .hashFailed("PBKDF2: \(error)")
            }
        case .scrypt(let salt, let memory):
            setNonce(nonceBytes)
            do {
                let key = try KDF.Scrypt.deriveKey(
                    from: password, salt: salt, outputByteCount: 16, rounds: memory,
                    blockSize: ProofOfWork.scryptBlockSize, parallelism: 1)
                return key.withUnsafeBytes(body)
            } catch {
                throw .hashFailed("scrypt: \(error)")
            }
        }
    }

    private mutating func setNonce(_ nonceBytes: UnsafeBufferPointer<UInt8>) {
        password.removeSubrange(baseCount...)
        password.append(contentsOf: nonceBytes)
    }
}
