import COpenSSL
import Crypto
import _CryptoExtras

/// One worker's hashing state for one puzzle: `input + checksum` followed by the digits of the
/// current nonce, in a buffer of its own. The digits are counted up in place, so moving to the next
/// nonce writes one byte in most cases and never builds a string.
///
/// SHA-256 hashes the fixed prefix once and copies that midstate per nonce (OpenSSL's context is a
/// plain C struct: the copy is a memcpy, where swift-crypto's SHA256 allocates), so a nonce costs
/// one or two compressions. PBKDF2 and scrypt go through swift-crypto: its BoringSSL PBKDF2 runs
/// 2.4 times as fast as OpenSSL 3's PKCS5_PBKDF2_HMAC here (make bench-pow), whose per-iteration
/// cost is the EVP_MAC dispatch.
struct NonceHasher: ~Copyable {
    private enum Kind {
        case sha256(prefix: SHA256_CTX)
        case pbkdf2(salt: [UInt8])
        case scrypt(salt: [UInt8], memory: Int)
    }

    private static let digitCapacity = 20  // Int.max in decimal has 19 digits

    private let kind: Kind
    private let format: NonceFormat
    /// `base` bytes of `input + checksum`, then `digitCount` nonce digits.
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private let base: Int
    private var digitCount = 0

    init(_ work: ProofOfWork, nonceCapacity: Int = NonceHasher.digitCapacity) throws(ProofOfWorkError) {
        if let reason = work.unsolvableReason { throw .unsolvable(reason) }
        let prefix = Array((work.input + work.checksum).utf8)
        switch work.type {
        case .sha256:
            var context = SHA256_CTX()
            SHA256_Init(&context)
            SHA256_Update(&context, prefix, prefix.count)
            kind = .sha256(prefix: context)
        case .pbkdf2:
            kind = .pbkdf2(salt: Array(work.checksum.utf8.prefix(ProofOfWork.pbkdf2SaltLength)))
        case .scrypt:
            kind = .scrypt(salt: Array(work.checksum.utf8), memory: work.memory)
        case .networkBandwidth:
            throw .unsolvable("the \(work.type.name) challenge is for browsers only")
        }
        base = prefix.count
        format = work.nonceFormat
        buffer = .allocate(capacity: base + max(nonceCapacity, Self.digitCapacity))
        _ = buffer.initialize(fromContentsOf: prefix + Array(repeating: 0, count: buffer.count - base))
    }

    deinit { buffer.deallocate() }

    /// Makes `nonce` the current nonce.
    mutating func seek(to nonce: Int) {
        digitCount = format.write(nonce, into: UnsafeMutableBufferPointer(rebasing: buffer[base...]))
    }

    /// Moves to the next nonce by counting up the digits in place.
    @inline(__always)
    mutating func advance() {
        let top: UInt8 = format == .decimal ? UInt8(ascii: "9") : UInt8(ascii: "F")
        var index = base + digitCount - 1
        while index >= base {
            let digit = buffer[index]
            if digit != top {
                buffer[index] = digit == UInt8(ascii: "9") ? UInt8(ascii: "A") : digit + 1
                return
            }
            buffer[index] = UInt8(ascii: "0")
            index -= 1
        }
        // Every digit carried: 99…9 + 1 = 100…0, one digit longer.
        buffer[base] = UInt8(ascii: "1")
        buffer[base + digitCount] = UInt8(ascii: "0")
        digitCount += 1
    }

    /// The current nonce's digits, as written into the hashed text.
    var nonceDigits: String { String(decoding: buffer[base..<(base + digitCount)], as: UTF8.self) }

    /// Leading zero bits of the current nonce's digest.
    @inline(__always)
    mutating func leadingZeroBits() throws(ProofOfWorkError) -> Int {
        // A 16-byte scrypt key leaves the last two words as they are: all ones, so at most 128 bits
        // count.
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, .max, .max)
        _ = try withUnsafeMutableBytes(of: &words) { digest throws(ProofOfWorkError) in try hash(into: digest) }
        // The digest's bytes in order are the words' bytes in memory: big-endian words.
        if words.0 != 0 { return UInt64(bigEndian: words.0).leadingZeroBitCount }
        if words.1 != 0 { return 64 + UInt64(bigEndian: words.1).leadingZeroBitCount }
        if words.2 != 0 { return 128 + UInt64(bigEndian: words.2).leadingZeroBitCount }
        return 192 + UInt64(bigEndian: words.3).leadingZeroBitCount
    }

    /// The digest of `input + checksum + nonce` for any nonce text, such as one a client sent.
    mutating func digest(nonce: some Collection<UInt8>) throws(ProofOfWorkError) -> [UInt8] {
        precondition(base + nonce.count <= buffer.count, "a nonce longer than the hasher's capacity")
        _ = UnsafeMutableBufferPointer(rebasing: buffer[base...]).initialize(fromContentsOf: nonce)
        digitCount = nonce.count
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let count = try withUnsafeMutableBytes(of: &words) { output throws(ProofOfWorkError) in try hash(into: output) }
        return withUnsafeBytes(of: words) { Array($0.prefix(count)) }
    }

    /// Writes the current nonce's digest into `output` (32 bytes) and returns its length.
    @inline(__always)
    private func hash(into output: UnsafeMutableRawBufferPointer) throws(ProofOfWorkError) -> Int {
        let message = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[..<(base + digitCount)]))
        let digest = output.bindMemory(to: UInt8.self).baseAddress
        switch kind {
        case .sha256(var context):
            SHA256_Update(&context, message.baseAddress! + base, digitCount)
            SHA256_Final(digest, &context)
            return 32
        case .pbkdf2(let salt):
            do {
                let key = try KDF.Insecure.PBKDF2.deriveKey(
                    from: message, salt: salt, using: .sha256, outputByteCount: 32,
                    unsafeUncheckedRounds: ProofOfWork.pbkdf2Iterations)
                return key.withUnsafeBytes { key in
                    output.copyMemory(from: key)
                    return key.count
                }
            } catch {
                throw .hashFailed("PBKDF2: \(error)")
            }
        case .scrypt(let salt, let memory):
            do {
                let key = try KDF.Scrypt.deriveKey(
                    from: Array(message), salt: salt, outputByteCount: 16, rounds: memory,
                    blockSize: ProofOfWork.scryptBlockSize, parallelism: 1)
                return key.withUnsafeBytes { key in
                    output.copyMemory(from: key)
                    return key.count
                }
            } catch {
                throw .hashFailed("scrypt: \(error)")
            }
        }
    }
}
